package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func commandLog(t *testing.T, index uint64, now time.Time, cmds ...fsm.Cmd) *raft.Log {
	t.Helper()
	data, err := fsm.Encode(&fsm.Entry{Now: ns(now), Cmds: cmds})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
}

// mustPanic runs fn and returns what it panicked with, failing if it did not.
func mustPanic(t *testing.T, fn func()) (v any) {
	t.Helper()
	defer func() { v = recover() }()
	fn()
	t.Fatal("did not panic")
	return nil
}

func TestApplyBatch(t *testing.T) {
	t.Run("NonCommandEntriesOnlyAdvanceTheAppliedIndex", func(t *testing.T) {
		f := newTestFSM(t)
		before := jobsJSON(t, f)
		out := f.ApplyBatch([]*raft.Log{
			{Index: 1, Type: raft.LogNoop},
			{Index: 2, Type: raft.LogConfiguration, Data: []byte("not an entry")},
			{Index: 3, Type: raft.LogBarrier},
		})
		if len(out) != 3 || out[0] != nil || out[1] != nil || out[2] != nil {
			t.Fatalf("replies = %v, want three nils", out)
		}
		if f.Applied() != 3 || jobsJSON(t, f) != before {
			t.Fatalf("applied = %d, want 3 and no change", f.Applied())
		}
	})

	t.Run("ReappliedEntriesAreNoOps", func(t *testing.T) {
		h := setup(t)
		var logs []*raft.Log
		for i := uint64(1); i <= 6; i++ {
			cmds := []fsm.Cmd{submit(fsm.NewJob{Command: "x", MaxAttempts: 2})}
			if i%2 == 0 {
				cmds = append(cmds, claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: int64(ttl)}), fail(fmt.Sprintf("job-%d", i/2), 0, "boom"))
			}
			logs = append(logs, commandLog(t, i, t0.Add(time.Duration(i)*time.Second), cmds...))
		}
		h.f.ApplyBatch(logs)
		want := digest(t, h.f)
		// A restart or a replayed batch hands the FSM entries it has.
		out := h.f.ApplyBatch(logs[2:])
		for i, o := range out {
			if o != nil {
				t.Errorf("reply %d to an applied entry = %v, want nil", i, o)
			}
		}
		if digest(t, h.f) != want || h.f.Applied() != 6 {
			t.Fatalf("re-applying changed the state (applied %d)", h.f.Applied())
		}
		// A batch that straddles the applied index applies only the new part.
		out = h.f.ApplyBatch([]*raft.Log{logs[5], commandLog(t, 7, t0.Add(time.Minute), submit(fsm.NewJob{Command: "new"}))})
		if out[0] != nil || len(out[1].([]fsm.Result)) != 1 {
			t.Fatalf("straddling batch replies = %v", out)
		}
		if n := len(allJobs(t, h.f)); n != 7 {
			t.Fatalf("%d jobs, want 7", n)
		}
	})

	t.Run("BatchAppliesLikeOneByOne", func(t *testing.T) {
		var logs []*raft.Log
		for i := uint64(1); i <= 8; i++ {
			logs = append(logs, commandLog(t, i, t0.Add(time.Duration(i)*time.Second),
				submit(fsm.NewJob{Command: "x", Priority: int(i % 3)}),
				claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: int64(ttl)})))
		}
		a, b := newTestFSM(t), newTestFSM(t)
		var one []any
		for _, l := range logs {
			one = append(one, a.ApplyBatch([]*raft.Log{l})...)
		}
		batched := b.ApplyBatch(logs)
		if !reflect.DeepEqual(resultsJSON(t, one), resultsJSON(t, batched)) {
			t.Fatal("batched results differ from one-by-one results")
		}
		if digest(t, a) != digest(t, b) {
			t.Fatal("batched state differs from one-by-one state")
		}
	})

	t.Run("ApplyTakesOneEntry", func(t *testing.T) {
		f := newTestFSM(t)
		out := f.Apply(commandLog(t, 1, t0, submit(fsm.NewJob{Command: "x"})))
		res, ok := out.([]fsm.Result)
		if !ok || len(res) != 1 || res[0].Jobs[0].ID != "job-1" {
			t.Fatalf("Apply = %#v", out)
		}
	})

	t.Run("UndecodableEntryStopsTheNodeAndItsStoreKeepsTheLastGoodBatch", func(t *testing.T) {
		cases := []struct {
			name string
			data []byte
			want string
		}{
			{"Garbage", []byte("\x01{{{"), "corrupt entry"},
			{"NewerVersion", []byte{99, '{', '}'}, "upgrade"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				// Built by hand: after the panic the FSM's memory is not to
				// be trusted (the node is meant to die), only its store.
				path := filepath.Join(t.TempDir(), "state.db")
				st, err := store.Open(path, store.Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				f, err := fsm.New(st, nil)
				if err != nil {
					t.Fatal(err)
				}
				applyCmd(t, f, 1, t0, submit(fsm.NewJob{Command: "x"}))
				before := digest(t, f)
				v := mustPanic(t, func() {
					f.ApplyBatch([]*raft.Log{
						commandLog(t, 2, t0, submit(fsm.NewJob{Command: "y"})),
						{Index: 3, Type: raft.LogCommand, Data: c.data},
					})
				})
				if msg := fmt.Sprint(v); !strings.Contains(msg, "index 3") || !strings.Contains(msg, c.want) {
					t.Fatalf("panic %q, want it to name index 3 and %q", msg, c.want)
				}
				// The batch's transaction rolled back: not even entry 2 stuck.
				if digest(t, f) != before {
					t.Fatal("a stopped batch changed the stored state")
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				st, err = store.Open(path, store.Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				f, err = fsm.New(st, nil)
				if err != nil {
					t.Fatal(err)
				}
				if f.Applied() != 1 || len(allJobs(t, f)) != 1 {
					t.Fatalf("after restart: applied %d with %d jobs, want 1 and 1", f.Applied(), len(allJobs(t, f)))
				}
				if err := f.Check(); err != nil {
					t.Fatal(err)
				}
			})
		}
	})

	t.Run("RestartResumesFromTheStoredIndex", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		open := func() (*store.Store, *fsm.FSM) {
			st, err := store.Open(path, store.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			f, err := fsm.New(st, nil)
			if err != nil {
				t.Fatal(err)
			}
			return st, f
		}
		st, f := open()
		applyCmd(t, f, 1, t0, submit(fsm.NewJob{Command: "low"}, fsm.NewJob{Command: "high", Priority: 9}, fsm.NewJob{Command: "later", RunAt: ns(t0.Add(time.Hour))}))
		applyCmd(t, f, 2, t0, claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: int64(ttl)}))
		applyCmd(t, f, 3, t0, pause("q", true))
		queues, leases, due := f.Queues(), f.Expired(math.MaxInt64, 100), f.NextDue()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}

		st, f = open()
		defer st.Close()
		if f.Applied() != 3 {
			t.Fatalf("applied after restart = %d, want 3", f.Applied())
		}
		if !reflect.DeepEqual(f.Queues(), queues) || !slices.Equal(f.Expired(math.MaxInt64, 100), leases) || f.NextDue() != due {
			t.Fatal("indexes rebuilt on restart differ from the ones before")
		}
		written := st.BytesWritten()
		if out := f.ApplyBatch([]*raft.Log{commandLog(t, 2, t0, claimCmd(fsm.Claim{WorkerID: "x"}))}); out[0] != nil {
			t.Fatal("an entry applied before the restart was applied again")
		}
		if st.BytesWritten() != written {
			t.Fatal("a batch of entries applied before the restart wrote a transaction")
		}
		res := applyCmd(t, f, 4, t0.Add(time.Second), claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: int64(ttl)}))
		if got := jobIDs(res[0].Jobs); !slices.Equal(got, []string{"job-1"}) {
			t.Fatalf("claim after restart = %v, want [job-1]", got)
		}
		if err := f.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSnapshot(t *testing.T) {
	// busy builds a state with every kind of record.
	busy := func(t *testing.T) *harness {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Slots: 4}))
		h.ok(fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: "n1", HTTP: "127.0.0.1:1", Raft: "127.0.0.1:2"}})
		h.submit(
			fsm.NewJob{Command: "done"},
			fsm.NewJob{Command: "running", Priority: 1, Timeout: int64(time.Minute)},
			fsm.NewJob{Command: "blocked", DependsOn: []string{"$1"}},
			fsm.NewJob{Command: "delayed", RunAt: ns(t0.Add(time.Hour))},
			fsm.NewJob{Command: "pending", Queue: "q"},
			fsm.NewJob{Command: "typed", Type: "img", IdempotencyKey: "k"},
			fsm.NewJob{Command: "cancelling"},
		)
		h.ok(succeed(h.claimOne("w1").ID, 0))
		h.claim(fsm.Claim{WorkerID: "w1", Max: 2})
		h.ok(cancel("job-7", false))
		h.ok(pause("paused", true))
		h.at(time.Second)
		return h
	}
	// followUp is a sequence that reads every index: claims in every
	// order, heartbeats, expiries, unblocking and a repeated key.
	followUp := func(h *harness) [][]fsm.Result {
		var out [][]fsm.Result
		step := func(d time.Duration, cmds ...fsm.Cmd) { out = append(out, h.at(d).do(cmds...)) }
		step(2*time.Second, workerHeartbeat("w1", ttl))
		step(3*time.Second, claimCmd(fsm.Claim{WorkerID: "w2", Queues: []string{"q", "default"}, Types: []string{"img"}, Shell: true, Max: 5, LeaseTTL: int64(ttl)}))
		step(4*time.Second, succeed("job-2", 0), report(fsm.Report{JobID: "job-7", Error: "stopped"}))
		step(30*time.Second, fsm.Cmd{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: "job-5", Lease: h.index - 1}})
		step(31*time.Second, submit(fsm.NewJob{IdempotencyKey: "k"}), claimCmd(fsm.Claim{WorkerID: "w3", Max: 9, LeaseTTL: int64(ttl)}))
		step(2*time.Hour, claimCmd(fsm.Claim{WorkerID: "w3", Max: 9, LeaseTTL: int64(ttl)}), pause("paused", false))
		return out
	}

	t.Run("RestoredCopyBehavesLikeTheOriginal", func(t *testing.T) {
		h := busy(t)
		g := &harness{t: t, f: snapshotRestore(t, h.f), index: h.index, now: h.now}
		a, b := followUp(h), followUp(g)
		if !reflect.DeepEqual(resultsJSON(t, toAny(a)), resultsJSON(t, toAny(b))) {
			t.Fatalf("results differ after restore:\noriginal %v\nrestored %v", resultsJSON(t, toAny(a)), resultsJSON(t, toAny(b)))
		}
		if digest(t, h.f) != digest(t, g.f) {
			t.Fatal("states differ after the same entries")
		}
		if ws, _ := g.f.Workers(); len(ws) != 3 {
			t.Errorf("restored workers = %d, want 3", len(ws))
		}
		if ns, _ := g.f.Nodes(); len(ns) != 1 || ns[0].ID != "n1" {
			t.Errorf("restored nodes = %+v", ns)
		}
	})

	t.Run("SnapshotIsTheStateWhenTaken", func(t *testing.T) {
		h := busy(t)
		want := digest(t, h.f)
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		followUp(h) // applies go on while the snapshot is open
		sink := new(memSink)
		err = snap.Persist(sink)
		snap.Release()
		if err != nil {
			t.Fatal(err)
		}
		g := newTestFSM(t)
		if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
			t.Fatal(err)
		}
		if digest(t, g) != want {
			t.Fatal("restored state is not the state when the snapshot was taken")
		}
	})

	t.Run("RestoreReplacesStateAndSignalsChanged", func(t *testing.T) {
		src := busy(t)
		data := snapshotBytes(t, src.f)
		dst := setup(t)
		dst.submit(fsm.NewJob{Command: "to be replaced"}, fsm.NewJob{Command: "b"})
		dst.claimOne("other")
		changed := dst.f.Changed()
		if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatal(err)
		}
		if !closed(changed) {
			t.Error("restore did not signal Changed")
		}
		if digest(t, dst.f) != digest(t, src.f) || dst.f.Applied() != src.f.Applied() {
			t.Fatal("restore did not replace the state")
		}
		if _, err := dst.f.Worker("other"); !errors.Is(err, fsm.ErrWorkerNotFound) {
			t.Fatalf("a worker of the replaced state survived: %v", err)
		}
	})

	t.Run("RestoreOfGarbageFailsAndKeepsState", func(t *testing.T) {
		h := busy(t)
		good := snapshotBytes(t, h.f)
		for _, data := range [][]byte{nil, []byte("garbage"), good[:len(good)/3]} {
			before := digest(t, h.f)
			if err := h.f.Restore(io.NopCloser(bytes.NewReader(data))); err == nil {
				t.Fatalf("restored %d bytes of garbage", len(data))
			}
			if digest(t, h.f) != before {
				t.Fatal("a failed restore changed the state")
			}
		}
		followUp(h) // still applies
	})
}

func TestReads(t *testing.T) {
	h := setup(t)
	h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"})
	if _, err := h.f.Job("job-9"); !errors.Is(err, fsm.ErrNotFound) {
		t.Errorf("unknown job: err %v, want ErrNotFound", err)
	}
	if _, err := h.f.Worker("w9"); !errors.Is(err, fsm.ErrWorkerNotFound) {
		t.Errorf("unknown worker: err %v, want ErrWorkerNotFound", err)
	}
	jobs, err := h.f.Jobs([]string{"job-2", "nope", "job-1"})
	if err != nil || !slices.Equal(jobIDs(jobs), []string{"job-2", "job-1"}) {
		t.Errorf("Jobs = %v, %v; want [job-2 job-1]", jobIDs(jobs), err)
	}
	page, next, err := h.f.ListJobs(store.ListQuery{Status: store.StatusPending, Limit: 1})
	if err != nil || !slices.Equal(jobIDs(page), []string{"job-2"}) || next != 2 {
		t.Errorf("ListJobs = %v next %d %v; want [job-2] next 2", jobIDs(page), next, err)
	}
	h.ok(fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: "n2", HTTP: "b"}})
	h.ok(fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: "n1", HTTP: "a"}})
	h.ok(fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: "n1", HTTP: "a2"}})
	h.ok(fsm.Cmd{Op: fsm.OpRemoveNode, Node: &store.Node{ID: "n2"}})
	h.ok(fsm.Cmd{Op: fsm.OpRemoveNode, Node: &store.Node{ID: "never"}})
	if nodes, err := h.f.Nodes(); err != nil || len(nodes) != 1 || *nodes[0] != (store.Node{ID: "n1", HTTP: "a2"}) {
		t.Errorf("Nodes = %+v, %v; want n1 at a2", nodes, err)
	}
}

func TestConcurrentReads(t *testing.T) {
	// Read methods may run while entries apply and a snapshot persists;
	// run under -race.
	g := &logGen{t: t, r: rand.New(rand.NewSource(7)), f: newTestFSM(t), now: t0}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	reader := func(read func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					read()
				}
			}
		}()
	}
	f := g.f
	reader(func() { _, _ = f.Job("job-1"); _, _, _ = f.ListJobs(store.ListQuery{Limit: 5}) })
	reader(func() { _ = f.Queues(); _ = f.Expired(math.MaxInt64, 10); _ = f.NextDue(); _ = f.Applied() })
	reader(func() { _ = f.Claimable(nil, []string{"img"}, true, ns(t0)); _ = f.Changed(); _, _ = f.Workers() })
	reader(func() { _, _ = f.Digest(); _ = f.ExpiredJobs(math.MaxInt64, 10) })
	for i := 0; i < 100; i++ {
		g.next()
		if i == 50 {
			snap, err := f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer snap.Release()
				if err := snap.Persist(new(memSink)); err != nil {
					t.Errorf("persist: %v", err)
				}
			}()
		}
	}
	close(stop)
	wg.Wait()
}

func TestQueues(t *testing.T) {
	h := setup(t)
	type counts = map[store.Status]int
	expect := func(want map[string]counts) {
		t.Helper()
		got := make(map[string]counts)
		for _, q := range h.f.Queues() {
			got[q.Name] = q.Counts
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Queues = %v, want %v", got, want)
		}
	}
	h.submit(fsm.NewJob{Command: "a", MaxAttempts: 2}, fsm.NewJob{Command: "b"}, fsm.NewJob{Command: "c", Queue: "q", DependsOn: []string{"$0"}})
	expect(map[string]counts{"default": {store.StatusPending: 2}, "q": {store.StatusBlocked: 1}})
	a, b := h.claimOne("w"), h.claimOne("w")
	expect(map[string]counts{"default": {store.StatusRunning: 2}, "q": {store.StatusBlocked: 1}})
	h.ok(cancel(b.ID, false))
	expect(map[string]counts{"default": {store.StatusRunning: 1, store.StatusCancelling: 1}, "q": {store.StatusBlocked: 1}})
	h.ok(fail(b.ID, 0, "stopped"))
	h.ok(fail(a.ID, 0, "boom"))
	expect(map[string]counts{"default": {store.StatusPending: 1, store.StatusCancelled: 1}, "q": {store.StatusBlocked: 1}})
	h.ok(succeed(h.claimOne("w").ID, 0))
	expect(map[string]counts{"default": {store.StatusDone: 1, store.StatusCancelled: 1}, "q": {store.StatusPending: 1}})
	h.ok(pause("empty", true))
	qs := h.f.Queues()
	if len(qs) != 3 || qs[1].Name != "empty" || !qs[1].Paused || len(qs[1].Counts) != 0 {
		t.Fatalf("Queues = %+v, want a paused empty queue between default and q", qs)
	}
	h.ok(retry(b.ID))
	expect(map[string]counts{"default": {store.StatusDone: 1, store.StatusPending: 1}, "empty": {}, "q": {store.StatusPending: 1}})
	snapshotRestore(t, h.f)
}

// resultsJSON renders ApplyBatch replies comparably (errors as text).
func resultsJSON(t *testing.T, replies []any) []string {
	t.Helper()
	type result struct {
		Err      string
		Jobs     []*store.Job
		Existing bool
		Renewed  int
		Deleted  int
		Deadline int64
		Actions  []fsm.Action
		Worker   *store.Worker
	}
	out := make([]string, len(replies))
	for i, reply := range replies {
		res, _ := reply.([]fsm.Result)
		rs := make([]result, len(res))
		for k, r := range res {
			rs[k] = result{Jobs: r.Jobs, Existing: r.Existing, Renewed: r.Renewed, Deleted: r.Deleted, Deadline: r.Deadline, Actions: r.Actions, Worker: r.Worker}
			if r.Err != nil {
				rs[k].Err = r.Err.Error()
			}
		}
		b, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func toAny(rs [][]fsm.Result) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// logGen generates a random but plausible log, consulting the FSM it
// applies each entry to so that commands name real jobs and leases often.
type logGen struct {
	t     *testing.T
	r     *rand.Rand
	f     *fsm.FSM
	now   time.Time
	index uint64
	jobs  int // highest job number created
}

func (g *logGen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }

// jobID names a known job mostly, an unknown one sometimes.
func (g *logGen) jobID() string {
	return fmt.Sprintf("job-%d", 1+g.r.Intn(g.jobs+2))
}

// runningID names a job that holds a lease more often than not.
func (g *logGen) runningID() string {
	if leases := g.f.Expired(math.MaxInt64, 1000); len(leases) > 0 && g.r.Intn(3) > 0 {
		return leases[g.r.Intn(len(leases))].JobID
	}
	return g.jobID()
}

// lease is the job's current lease mostly, else 0 or a stale one.
func (g *logGen) lease(id string) uint64 {
	switch n := g.r.Intn(10); {
	case n < 6:
		if j, err := g.f.Job(id); err == nil {
			return j.Lease
		}
		return 0
	case n < 8:
		return 0
	default:
		return uint64(g.r.Intn(int(g.index) + 1))
	}
}

func (g *logGen) newJob(i int) fsm.NewJob {
	nj := fsm.NewJob{
		Command:     "cmd",
		Queue:       g.pick("", "", "q1", "q2"),
		Type:        g.pick("", "", "img"),
		Priority:    g.r.Intn(3),
		MaxAttempts: g.r.Intn(4),
		Backoff:     store.Backoff{Base: int64(g.r.Intn(3)) * int64(time.Second), Max: int64(g.r.Intn(2)) * int64(10*time.Second), Jitter: float64(g.r.Intn(2)) / 2},
	}
	if nj.Type != "" {
		nj.Command = ""
		nj.Payload = json.RawMessage(fmt.Sprintf(`{"n": %d}`, g.r.Intn(100)))
	}
	if g.r.Intn(5) == 0 {
		nj.RunAt = ns(g.now.Add(time.Duration(g.r.Intn(20)) * time.Second))
	}
	if g.r.Intn(5) == 0 {
		nj.Timeout = int64(time.Duration(1+g.r.Intn(30)) * time.Second)
	}
	if g.r.Intn(7) == 0 {
		nj.IdempotencyKey = g.pick("k0", "k1", "k2", "k3", "k4")
		if g.r.Intn(2) == 0 {
			nj.UniqueFor = int64(time.Duration(g.r.Intn(60)) * time.Second)
		}
	}
	if g.r.Intn(3) == 0 {
		nj.Retention = int64(time.Duration(1+g.r.Intn(30)) * time.Second)
	}
	if g.r.Intn(3) == 0 {
		nj.Env = map[string]string{"B": "2", "A": g.pick("1", "x")}
	}
	switch g.r.Intn(10) {
	case 0, 1, 2:
		nj.DependsOn = []string{g.jobID()}
	case 3, 4:
		if i > 0 {
			nj.DependsOn = []string{fmt.Sprintf("$%d", g.r.Intn(i))}
		}
	case 5:
		nj.DependsOn = []string{fmt.Sprintf("$%d", g.r.Intn(i+2))} // may be a cycle or out of range
	}
	if g.r.Intn(3) == 0 {
		nj.ConcurrencyKey = g.pick("acme", "beta", "gamma")
	}
	return nj
}

// limits are random flow-control limits, zero (none) sometimes.
func (g *logGen) limits() store.QueueLimits {
	var l store.QueueLimits
	if g.r.Intn(2) == 0 {
		l.Concurrency = g.r.Intn(4)
	}
	if g.r.Intn(2) == 0 {
		l.KeyConcurrency = g.r.Intn(3)
	}
	if g.r.Intn(2) == 0 {
		l.Rate, l.Burst = store.Rate{Count: int64(1 + g.r.Intn(3)), Per: int64(time.Second)}, g.r.Intn(3)
	}
	if g.r.Intn(2) == 0 {
		l.KeyRate, l.KeyBurst = store.Rate{Count: 1, Per: int64(time.Duration(1+g.r.Intn(5)) * time.Second)}, g.r.Intn(2)
	}
	if g.r.Intn(3) == 0 {
		l.KeyWeights = map[string]int{"acme": 1 + g.r.Intn(3), g.pick("beta", "gamma"): 2}
	}
	return l
}

func (g *logGen) cmd() fsm.Cmd {
	ttl := int64(time.Duration(5+g.r.Intn(10)) * time.Second)
	worker := g.pick("w0", "w1", "w2")
	switch n := g.r.Intn(100); {
	case n < 20:
		jobs := make([]fsm.NewJob, 1+g.r.Intn(3))
		for i := range jobs {
			jobs[i] = g.newJob(i)
		}
		return submit(jobs...)
	case n < 40:
		c := fsm.Claim{WorkerID: worker, Shell: g.r.Intn(2) == 0, Max: g.r.Intn(4), LeaseTTL: ttl, Fair: g.r.Intn(3) > 0}
		if g.r.Intn(2) == 0 {
			c.Types = []string{"img"}
		}
		if g.r.Intn(3) > 0 {
			c.Queues = []string{g.pick("default", "q1", "q2"), g.pick("default", "q1", "q2", "q3")}
		}
		return claimCmd(c)
	case n < 47:
		id := g.runningID()
		return heartbeat(id, g.lease(id), time.Duration(ttl))
	case n < 52:
		return workerHeartbeat(g.pick("w0", "w1", "w2", "ghost"), time.Duration(ttl))
	case n < 70:
		id := g.runningID()
		r := fsm.Report{JobID: id, Lease: g.lease(id), Success: g.r.Intn(2) == 0, Final: g.r.Intn(10) == 0, Draw: g.r.Float64()}
		if g.r.Intn(3) == 0 {
			r.ExitCode = intp(g.r.Intn(3))
		}
		if g.r.Intn(20) == 0 {
			r.Output = strings.Repeat("é", fsm.MaxOutput)
		} else if g.r.Intn(2) == 0 {
			r.Output = "out"
		}
		if g.r.Intn(2) == 0 {
			r.Error = "boom"
		}
		switch g.r.Intn(8) {
		case 0:
			r.Success, r.RateLimitedFor = false, int64(time.Duration(1+g.r.Intn(10))*time.Second)
		case 1:
			r.Success, r.SnoozeFor = false, int64(time.Duration(1+g.r.Intn(10))*time.Second)
		}
		return report(r)
	case n < 80:
		e := &fsm.Expire{Draw: g.r.Float64()}
		if due := g.f.Expired(ns(g.now), 5); len(due) > 0 && g.r.Intn(4) > 0 {
			l := due[g.r.Intn(len(due))]
			e.JobID, e.Lease = l.JobID, l.Lease
		} else {
			e.JobID = g.jobID()
			e.Lease = g.lease(e.JobID)
		}
		return fsm.Cmd{Op: fsm.OpExpire, Expire: e}
	case n < 83:
		return register(store.Worker{ID: worker, Slots: g.r.Intn(8), Queues: []string{"default"}})
	case n < 89:
		return cancel(g.jobID(), g.r.Intn(2) == 0)
	case n < 93:
		if g.r.Intn(2) == 0 {
			return retryDeps(g.jobID())
		}
		return retry(g.jobID())
	case n < 97:
		ids := g.f.ExpiredJobs(ns(g.now), 4)
		if g.r.Intn(3) == 0 {
			ids = append(ids, g.jobID())
		}
		return fsm.Cmd{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: ids}}
	case n < 98:
		if g.r.Intn(2) == 0 {
			return fsm.Cmd{Op: fsm.OpRemoveNode, Node: &store.Node{ID: g.pick("n1", "n2")}}
		}
		return fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: g.pick("n1", "n2"), HTTP: g.pick("a", "b")}}
	default:
		if g.r.Intn(2) == 0 {
			return setLimits(g.pick("default", "q1", "q2"), g.limits())
		}
		return pause(g.pick("default", "q1", "q2", ""), g.r.Intn(2) == 0)
	}
}

// next generates the next log entry, applies it to g.f and returns it with
// the reply.
func (g *logGen) next() (*raft.Log, any) {
	g.index++
	switch g.r.Intn(20) {
	case 0:
		g.now = g.now.Add(-time.Duration(g.r.Intn(5000)) * time.Millisecond) // a leader with a slow clock
	default:
		g.now = g.now.Add(time.Duration(g.r.Intn(4000)) * time.Millisecond)
	}
	var l *raft.Log
	if g.r.Intn(25) == 0 {
		l = &raft.Log{Index: g.index, Type: raft.LogNoop}
	} else {
		cmds := make([]fsm.Cmd, 1+g.r.Intn(4))
		for i := range cmds {
			cmds[i] = g.cmd()
		}
		l = commandLog(g.t, g.index, g.now, cmds...)
	}
	reply := g.f.ApplyBatch([]*raft.Log{l})[0]
	if res, ok := reply.([]fsm.Result); ok {
		for _, r := range res {
			for _, j := range r.Jobs {
				var n int
				if _, err := fmt.Sscanf(j.ID, "job-%d", &n); err == nil && n > g.jobs {
					g.jobs = n
				}
			}
		}
	}
	return l, reply
}

func TestDeterminism(t *testing.T) {
	for _, seed := range []int64{1, 2} {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			g := &logGen{t: t, r: rand.New(rand.NewSource(seed)), f: newTestFSM(t), now: t0}
			var (
				logs    []*raft.Log
				replies []any
			)
			rejected, deleted := 0, 0
			for i := 0; i < 300; i++ {
				l, reply := g.next()
				logs = append(logs, l)
				replies = append(replies, reply)
				if res, ok := reply.([]fsm.Result); ok {
					for _, r := range res {
						if r.Err != nil {
							rejected++
						}
						deleted += r.Deleted
					}
				}
			}
			want := digest(t, g.f)
			wantResults := resultsJSON(t, replies)
			statuses := make(map[store.Status]int)
			for _, j := range allJobs(t, g.f) {
				statuses[j.Status]++
			}
			t.Logf("%d entries, %d jobs, %d rejections, %d deleted, statuses %v", len(logs), g.jobs, rejected, deleted, statuses)
			if rejected == 0 || deleted == 0 || statuses[store.StatusDone] == 0 || statuses[store.StatusFailed] == 0 || len(statuses) < 5 {
				t.Fatalf("the generated log is too tame: %d rejections, %d deleted, statuses %v", rejected, deleted, statuses)
			}

			t.Run("SameLogSameBytes", func(t *testing.T) {
				f := newTestFSM(t)
				r := rand.New(rand.NewSource(seed))
				var got []any
				for rest := logs; len(rest) > 0; {
					n := min(1+r.Intn(16), len(rest)) // raft hands over batches of any size
					got = append(got, f.ApplyBatch(rest[:n])...)
					rest = rest[n:]
				}
				if digest(t, f) != want {
					t.Fatal("two FSMs fed the same log hold different states")
				}
				if !slices.Equal(resultsJSON(t, got), wantResults) {
					t.Fatal("two FSMs fed the same log gave different results")
				}
				if !reflect.DeepEqual(f.Queues(), g.f.Queues()) || f.NextDue() != g.f.NextDue() ||
					!slices.Equal(f.Expired(math.MaxInt64, 1000), g.f.Expired(math.MaxInt64, 1000)) {
					t.Fatal("two FSMs fed the same log hold different indexes")
				}
			})

			t.Run("SnapshotMidwayThenTheRest", func(t *testing.T) {
				half := len(logs) / 2
				c := newTestFSM(t)
				c.ApplyBatch(logs[:half])
				d := snapshotRestore(t, c)
				var got []any
				for _, l := range logs[half:] {
					got = append(got, d.ApplyBatch([]*raft.Log{l})...)
				}
				if digest(t, d) != want {
					t.Fatal("restored FSM ended in a different state")
				}
				if !slices.Equal(resultsJSON(t, got), wantResults[half:]) {
					t.Fatal("restored FSM gave different results")
				}
			})

			t.Run("ReapplyingIsANoOp", func(t *testing.T) {
				for i, reply := range g.f.ApplyBatch(logs[len(logs)/3:]) {
					if reply != nil {
						t.Fatalf("reply %d to a re-applied entry = %v", i, reply)
					}
				}
				if digest(t, g.f) != want {
					t.Fatal("re-applying entries changed the state")
				}
			})
		})
	}
}
