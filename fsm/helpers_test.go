package fsm_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the tests' epoch; entries are stamped t0 plus some offset.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// ttl is the lease period the tests' workers ask for.
const ttl = 10 * time.Second

// newTestFSM opens a store in a fresh temp dir and wraps it in an FSM. At
// cleanup it checks the store's indexes and that the FSM's in-memory indexes
// agree with the stored jobs, then closes the store.
func newTestFSM(t *testing.T) *fsm.FSM {
	t.Helper()
	_, f := newTestStoreFSM(t)
	return f
}

// newTestStoreFSM is newTestFSM that also returns the FSM's store.
func newTestStoreFSM(t *testing.T) (*store.Store, *fsm.FSM) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	f, err := fsm.New(st, nil)
	if err != nil {
		st.Close()
		t.Fatalf("new fsm: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Check(); err != nil {
			t.Errorf("fsm check at cleanup: %v", err)
		}
		checkIndexes(t, f)
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st, f
}

// applyCmd applies cmds as one log entry at index, stamped now.
func applyCmd(t *testing.T, f *fsm.FSM, index uint64, now time.Time, cmds ...fsm.Cmd) []fsm.Result {
	t.Helper()
	data, err := fsm.Encode(&fsm.Entry{Now: now.UnixNano(), Cmds: cmds})
	if err != nil {
		t.Fatalf("encode entry %d: %v", index, err)
	}
	out := f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: data}})
	if len(out) != 1 {
		t.Fatalf("ApplyBatch of one log returned %d replies", len(out))
	}
	res, ok := out[0].([]fsm.Result)
	if !ok {
		t.Fatalf("entry %d: reply is %T, want []fsm.Result (was the index already applied?)", index, out[0])
	}
	if len(res) != len(cmds) {
		t.Fatalf("entry %d: %d results for %d commands", index, len(res), len(cmds))
	}
	if got := f.Applied(); got != index {
		t.Fatalf("applied index after entry %d = %d", index, got)
	}
	return res
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "test" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// snapshotBytes persists a snapshot of f and returns its bytes.
func snapshotBytes(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer snap.Release()
	sink := new(memSink)
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("persist left the sink closed=%v cancelled=%v, want closed", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// snapshotRestore snapshots f, restores the snapshot into a fresh FSM and
// checks that the copy holds the same state and rebuilt the same indexes.
func snapshotRestore(t *testing.T, f *fsm.FSM) *fsm.FSM {
	t.Helper()
	data := snapshotBytes(t, f)
	g := newTestFSM(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if digest(t, g) != digest(t, f) {
		t.Fatal("restored FSM's digest differs from the original's")
	}
	if g.Applied() != f.Applied() {
		t.Fatalf("restored applied index %d, want %d", g.Applied(), f.Applied())
	}
	if got, want := g.Queues(), f.Queues(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored queues %+v, want %+v", got, want)
	}
	if got, want := g.Expired(math.MaxInt64, math.MaxInt32), f.Expired(math.MaxInt64, math.MaxInt32); !slices.Equal(got, want) {
		t.Fatalf("restored leases %+v, want %+v", got, want)
	}
	return g
}

func digest(t *testing.T, f *fsm.FSM) string {
	t.Helper()
	d, err := f.Digest()
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	return d
}

// allJobs lists every job, oldest first.
func allJobs(t *testing.T, f *fsm.FSM) []*store.Job {
	t.Helper()
	jobs, _, err := f.ListJobs(store.ListQuery{})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	slices.Reverse(jobs)
	return jobs
}

// jobsJSON is every job's stored form, to compare whole states of the jobs.
func jobsJSON(t *testing.T, f *fsm.FSM) string {
	t.Helper()
	b, err := json.Marshal(allJobs(t, f))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkIndexes compares what the in-memory indexes report (queue counts,
// leases, the pending jobs' ids and intern tables) with the stored jobs.
func checkIndexes(t *testing.T, f *fsm.FSM) {
	t.Helper()
	counts := make(map[string]map[store.Status]int)
	var leases []fsm.Lease
	var pending []string
	for _, j := range allJobs(t, f) {
		if counts[j.Queue] == nil {
			counts[j.Queue] = make(map[store.Status]int)
		}
		counts[j.Queue][j.Status]++
		if j.Status == store.StatusPending {
			pending = append(pending, j.ID)
		}
		if j.Status.Leased() {
			leases = append(leases, fsm.Lease{JobID: j.ID, Lease: j.Lease, WorkerID: j.WorkerID, Deadline: j.LeaseDeadline})
		}
	}
	for _, q := range f.Queues() {
		if len(q.Counts) == 0 && counts[q.Name] == nil {
			continue
		}
		if !reflect.DeepEqual(q.Counts, counts[q.Name]) {
			t.Errorf("queue %s: index counts %v, stored jobs %v", q.Name, q.Counts, counts[q.Name])
		}
		delete(counts, q.Name)
	}
	if len(counts) != 0 {
		t.Errorf("queues missing from Queues(): %v", counts)
	}
	slices.SortFunc(leases, func(a, b fsm.Lease) int {
		return cmp.Or(cmp.Compare(a.Deadline, b.Deadline), strings.Compare(a.JobID, b.JobID))
	})
	if got := f.Expired(math.MaxInt64, math.MaxInt32); !slices.Equal(got, leases) {
		t.Errorf("lease index %+v, stored leases %+v", got, leases)
	}
	slices.Sort(pending)
	if got, err := fsm.PendingIDs(f); err != nil {
		t.Errorf("pending index: %v", err)
	} else if !slices.Equal(got, pending) {
		t.Errorf("pending index names %v, stored pending jobs %v", got, pending)
	}
}

// harness drives one FSM: entries get consecutive indexes and the clock
// set with at.
type harness struct {
	t     *testing.T
	f     *fsm.FSM
	index uint64
	now   time.Time
}

func setup(t *testing.T) *harness {
	return &harness{t: t, f: newTestFSM(t), now: t0}
}

// at sets the clock of the next entries to t0+d.
func (h *harness) at(d time.Duration) *harness {
	h.now = t0.Add(d)
	return h
}

// do applies cmds as the next log entry.
func (h *harness) do(cmds ...fsm.Cmd) []fsm.Result {
	h.t.Helper()
	h.index++
	return applyCmd(h.t, h.f, h.index, h.now, cmds...)
}

// batch applies each of entries as the next log entries, all in one
// ApplyBatch (one store transaction), and returns their results.
func (h *harness) batch(entries [][]fsm.Cmd) [][]fsm.Result {
	h.t.Helper()
	logs := make([]*raft.Log, len(entries))
	for i, cmds := range entries {
		data, err := fsm.Encode(&fsm.Entry{Now: h.now.UnixNano(), Cmds: cmds})
		if err != nil {
			h.t.Fatalf("encode entry: %v", err)
		}
		h.index++
		logs[i] = &raft.Log{Index: h.index, Type: raft.LogCommand, Data: data}
	}
	out := make([][]fsm.Result, len(entries))
	for i, r := range h.f.ApplyBatch(logs) {
		res, ok := r.([]fsm.Result)
		if !ok {
			h.t.Fatalf("entry %d: reply is %T", logs[i].Index, r)
		}
		out[i] = res
	}
	return out
}

// one applies c as the next log entry and returns its result.
func (h *harness) one(c fsm.Cmd) fsm.Result {
	h.t.Helper()
	return h.do(c)[0]
}

// ok applies c and fails the test if it was rejected.
func (h *harness) ok(c fsm.Cmd) fsm.Result {
	h.t.Helper()
	r := h.one(c)
	if r.Err != nil {
		h.t.Fatalf("%s at index %d rejected: %v", c.Op, h.index, r.Err)
	}
	return r
}

// reject applies c and fails the test unless it was rejected with target
// (any error if target is nil). It also checks the rejection changed no job.
func (h *harness) reject(c fsm.Cmd, target error) fsm.Result {
	h.t.Helper()
	before := jobsJSON(h.t, h.f)
	r := h.one(c)
	if r.Err == nil || (target != nil && !errors.Is(r.Err, target)) {
		h.t.Fatalf("%s at index %d: err %v, want %v", c.Op, h.index, r.Err, target)
	}
	if after := jobsJSON(h.t, h.f); after != before {
		h.t.Fatalf("%s at index %d was rejected but changed jobs:\nbefore %s\nafter  %s", c.Op, h.index, before, after)
	}
	return r
}

func (h *harness) job(id string) *store.Job {
	h.t.Helper()
	j, err := h.f.Job(id)
	if err != nil {
		h.t.Fatalf("job %s: %v", id, err)
	}
	return j
}

// dependents lists the ids of the jobs that depend on the job.
func (h *harness) dependents(id string) []string {
	h.t.Helper()
	ids, err := h.f.Dependents(id)
	if err != nil {
		h.t.Fatalf("dependents of %s: %v", id, err)
	}
	return ids
}

// submit creates jobs and returns them.
func (h *harness) submit(jobs ...fsm.NewJob) []*store.Job {
	h.t.Helper()
	return h.ok(submit(jobs...)).Jobs
}

// claim runs a claim and returns the leased jobs.
func (h *harness) claim(c fsm.Claim) []*store.Job {
	h.t.Helper()
	if c.LeaseTTL == 0 {
		c.LeaseTTL = int64(ttl)
	}
	return h.ok(claimCmd(c)).Jobs
}

// claimOne has worker claim one job from the default queue and returns it.
func (h *harness) claimOne(worker string) *store.Job {
	h.t.Helper()
	jobs := h.claim(fsm.Claim{WorkerID: worker})
	if len(jobs) != 1 {
		h.t.Fatalf("claim by %s at index %d got %d jobs, want 1", worker, h.index, len(jobs))
	}
	return jobs[0]
}

// status checks the stored status of jobs.
func (h *harness) status(want store.Status, ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		if got := h.job(id).Status; got != want {
			h.t.Errorf("job %s is %s, want %s", id, got, want)
		}
	}
}

func submit(jobs ...fsm.NewJob) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}}
}

func claimCmd(c fsm.Claim) fsm.Cmd { return fsm.Cmd{Op: fsm.OpClaim, Claim: &c} }

func heartbeat(id string, lease uint64, ttl time.Duration) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: id, Lease: lease, LeaseTTL: int64(ttl)}}
}

func workerHeartbeat(worker string, ttl time.Duration) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: worker, LeaseTTL: int64(ttl)}}
}

// listedHeartbeat is a worker heartbeat of worker that lists leases: it
// renews those alone.
func listedHeartbeat(worker string, leases ...fsm.LeaseRef) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{
		WorkerID: worker, LeaseTTL: int64(ttl), Listed: true, Leases: leases,
	}}
}

func report(r fsm.Report) fsm.Cmd { return fsm.Cmd{Op: fsm.OpReport, Report: &r} }

func succeed(id string, lease uint64) fsm.Cmd {
	return report(fsm.Report{JobID: id, Lease: lease, Success: true})
}

func fail(id string, lease uint64, msg string) fsm.Cmd {
	return report(fsm.Report{JobID: id, Lease: lease, Error: msg})
}

func expire(id string, lease uint64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: id, Lease: lease}}
}

func register(w store.Worker) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: w}}
}

func cancel(id string, cascade bool) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpCancel, Cancel: &fsm.Cancel{JobID: id, Cascade: cascade}}
}

func retry(id string) fsm.Cmd { return fsm.Cmd{Op: fsm.OpRetry, Retry: &fsm.Retry{JobID: id}} }

func retryDeps(id string) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpRetryDependents, Retry: &fsm.Retry{JobID: id, Dependents: true}}
}

func pause(name string, paused bool) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpPauseQueue, Queue: &fsm.PauseQueue{Name: name, Paused: paused}}
}

func ns(t time.Time) int64 { return t.UnixNano() }

func jobIDs(jobs []*store.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func intp(n int) *int { return &n }

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func setLimits(queue string, l store.QueueLimits) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpSetQueueLimits, QueueLimits: &fsm.SetQueueLimits{Name: queue, Limits: l}}
}
