package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/dispatch"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// groupNode records the groups proposed together, and runs before (if
// set) ahead of applying one, and beforeAll (if set) ahead of applying
// commands proposed each on its own (ProposeAll).
type groupNode struct {
	*loneNode
	mu        sync.Mutex
	groups    [][]fsm.Op
	before    func()
	beforeAll func(cmds []fsm.Cmd)
}

func (n *groupNode) ProposeAll(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, []error) {
	n.mu.Lock()
	before := n.beforeAll
	n.mu.Unlock()
	if before != nil {
		before(cmds)
	}
	return n.loneNode.ProposeAll(ctx, cmds)
}

func (n *groupNode) ProposeTogether(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, error) {
	ops := make([]fsm.Op, len(cmds))
	for i, c := range cmds {
		ops[i] = c.Op
	}
	n.mu.Lock()
	n.groups = append(n.groups, ops)
	before := n.before
	n.mu.Unlock()
	if before != nil {
		before()
	}
	return n.loneNode.ProposeTogether(ctx, cmds)
}

func (n *groupNode) proposed() [][]fsm.Op {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([][]fsm.Op(nil), n.groups...)
}

// handoffEnv is a Server over a groupNode, with helpers to park claims.
type handoffEnv struct {
	*schedEnv
	node *groupNode
}

func newHandoffEnv(t *testing.T) *handoffEnv {
	var node *groupNode
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), func(c *Config) {
		node = &groupNode{loneNode: c.Node.(*loneNode)}
		c.Node = node
		c.MaxWait = time.Minute
	})
	return &handoffEnv{schedEnv: e, node: node}
}

// parkClaim starts a long-poll of worker on queue q, with claim number seq,
// and waits until it is parked; the reply arrives on the channel.
func (e *handoffEnv) parkClaim(ctx context.Context, worker, q string, seq uint64) <-chan wire.ClaimResponse {
	e.t.Helper()
	before := e.parked()
	out := make(chan wire.ClaimResponse, 1)
	body := fmt.Sprintf(`{"worker_id":%q,"queues":[%q],"shell":true,"wait":"1m","claim_seq":%d}`, worker, q, seq)
	go func() {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/jobs/claim", strings.NewReader(body)))
		var cr wire.ClaimResponse
		_ = json.Unmarshal(rec.Body.Bytes(), &cr)
		out <- cr
	}()
	e.waitParked(before + 1)
	return out
}

func (e *handoffEnv) parked() int {
	return e.srv.waiters.Len()
}

func (e *handoffEnv) waitParked(n int) {
	e.t.Helper()
	poll.Wait(e.t, 10*time.Second, time.Millisecond, func() error {
		if got := e.parked(); got != n {
			return fmt.Errorf("%d claims parked, want %d", got, n)
		}
		return nil
	})
}

func (e *handoffEnv) submit(q string) wire.Job {
	e.t.Helper()
	var j wire.Job
	if code, werr := e.do(http.MethodPost, "/jobs", fmt.Sprintf(`{"command":"true","queue":%q}`, q), &j); code != http.StatusCreated {
		e.t.Fatalf("submit: %d %+v", code, werr)
	}
	return j
}

func (e *handoffEnv) job(id string) *store.Job {
	e.t.Helper()
	j, err := e.srv.state.Job(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *handoffEnv) register(worker, q string) {
	e.t.Helper()
	if code, werr := e.do(http.MethodPost, "/workers/register", fmt.Sprintf(`{"id":%q,"queues":[%q]}`, worker, q), nil); code >= 300 {
		e.t.Fatalf("register %s: %d %+v", worker, code, werr)
	}
}

// A long-poll parked on a queue gets a job submitted to it afterwards in
// the log entry that creates it: one entry holds the submit and the claim,
// and the job's record was last written at that entry's index.
func TestHandoffSubmitAndClaimShareAnEntry(t *testing.T) {
	e := newHandoffEnv(t)
	reply := e.parkClaim(context.Background(), "w1", "q", 1)
	before := e.node.Index()
	j := e.submit("q")
	cr := <-reply
	if len(cr.Jobs) != 1 || cr.Jobs[0].ID != j.ID {
		t.Fatalf("the parked claim got %+v, want job %s", cr.Jobs, j.ID)
	}
	if after := e.node.Index(); after != before+1 {
		t.Fatalf("submit and claim took entries %d..%d, want one", before+1, after)
	}
	if got := e.node.proposed(); len(got) != 1 || fmt.Sprint(got[0]) != "[submit claim]" {
		t.Fatalf("groups proposed: %v, want one of submit then claim", got)
	}
	if n := testutil.ToFloat64(e.srv.metrics.handedOff.of("q")); n != 1 {
		t.Fatalf("workron_jobs_handed_off_total{queue=q} = %v, want 1", n)
	}
	if got := e.job(j.ID); got.Status != store.StatusRunning || got.WorkerID != "w1" || got.ModifyIndex != before+1 || got.ClaimSeq != 1 {
		t.Fatalf("job %s: %s on %q, modified at %d, claim %d; want running on w1, modified at %d by claim 1",
			j.ID, got.Status, got.WorkerID, got.ModifyIndex, got.ClaimSeq, before+1)
	}
	t.Run("AnotherQueueTakesNoWaiter", func(t *testing.T) {
		reply := e.parkClaim(context.Background(), "w2", "q", 2)
		other := e.submit("other")
		if got := e.job(other.ID); got.Status != store.StatusPending {
			t.Fatalf("job of queue other: %s, want pending", got.Status)
		}
		if n := len(e.node.proposed()); n != 1 {
			t.Fatalf("%d groups proposed, want still 1", n)
		}
		j := e.submit("q")
		if cr := <-reply; len(cr.Jobs) != 1 || cr.Jobs[0].ID != j.ID {
			t.Fatalf("the parked claim got %+v, want job %s", cr.Jobs, j.ID)
		}
	})
}

// The FSM still decides a claim proposed beside a submit: on a paused
// queue it gets nothing, the job stays pending, and the long-poll goes on
// waiting until the queue is resumed.
func TestHandoffPausedQueueHoldsTheJob(t *testing.T) {
	e := newHandoffEnv(t)
	if code, werr := e.do(http.MethodPost, "/queues/q/pause", nil, nil); code >= 300 {
		t.Fatalf("pause: %d %+v", code, werr)
	}
	reply := e.parkClaim(context.Background(), "w1", "q", 1)
	j := e.submit("q")
	if got := e.node.proposed(); len(got) != 1 {
		t.Fatalf("groups proposed: %v, want the submit's with the parked claim", got)
	}
	e.waitParked(1) // it got nothing and parked again
	if got := e.job(j.ID); got.Status != store.StatusPending {
		t.Fatalf("job on a paused queue: %s, want pending", got.Status)
	}
	select {
	case cr := <-reply:
		t.Fatalf("the long-poll ended with %+v while its queue was paused", cr)
	default:
	}
	if code, werr := e.do(http.MethodPost, "/queues/q/resume", nil, nil); code >= 300 {
		t.Fatalf("resume: %d %+v", code, werr)
	}
	if cr := <-reply; len(cr.Jobs) != 1 || cr.Jobs[0].ID != j.ID {
		t.Fatalf("after resume the claim got %+v, want job %s", cr.Jobs, j.ID)
	}
}

// A concurrency limit holds a job submitted beside a parked claim: the
// claim gets nothing, and the long-poll gets the job once the limit lets
// it run.
func TestHandoffLimitHoldsTheJob(t *testing.T) {
	e := newHandoffEnv(t)
	if code, werr := e.do(http.MethodPut, "/queues/q", `{"concurrency":1}`, nil); code >= 300 {
		t.Fatalf("set limit: %d %+v", code, werr)
	}
	first := e.submit("q")
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w0","queues":["q"],"shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("claim of the first job: %d %+v %+v", code, werr, cr)
	}
	reply := e.parkClaim(context.Background(), "w1", "q", 1)
	j := e.submit("q")
	if got := e.node.proposed(); len(got) != 1 {
		t.Fatalf("groups proposed: %v, want the submit's with the parked claim", got)
	}
	e.waitParked(1)
	if got := e.job(j.ID); got.Status != store.StatusPending {
		t.Fatalf("job held by the limit: %s, want pending", got.Status)
	}
	done := fmt.Sprintf(`{"lease":%d,"exit_code":0}`, cr.Jobs[0].Lease)
	if code, werr := e.do(http.MethodPost, "/jobs/"+first.ID+"/done", done, nil); code >= 300 {
		t.Fatalf("done: %d %+v", code, werr)
	}
	if cr := <-reply; len(cr.Jobs) != 1 || cr.Jobs[0].ID != j.ID {
		t.Fatalf("once the first job ended the claim got %+v, want job %s", cr.Jobs, j.ID)
	}
}

// A long-poll whose request ended before a submit came is no longer
// parked: the job stays pending for the next worker.
func TestHandoffEndedPollIsNotTaken(t *testing.T) {
	e := newHandoffEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	reply := e.parkClaim(ctx, "w1", "q", 1)
	cancel()
	<-reply
	e.waitParked(0)
	j := e.submit("q")
	if got := e.node.proposed(); len(got) != 0 {
		t.Fatalf("groups proposed: %v, want none", got)
	}
	if got := e.job(j.ID); got.Status != store.StatusPending {
		t.Fatalf("job: %s, want pending", got.Status)
	}
}

// A long-poll taken by a submit whose request ends before the claim is
// applied: the claim still applies (the job runs on the worker, under the
// claim's number), and the worker's next heartbeat, naming that claim as
// ended, gives the job back at once without counting the attempt, as for
// any claim whose reply was lost.
func TestHandoffTakenPollThatEndsGivesTheJobBack(t *testing.T) {
	e := newHandoffEnv(t)
	e.register("w1", "q")
	ctx, cancel := context.WithCancel(context.Background())
	reply := e.parkClaim(ctx, "w1", "q", 7)
	e.node.before = cancel // the worker gives up as the entry is proposed
	j := e.submit("q")
	<-reply
	got := e.job(j.ID)
	if got.Status != store.StatusRunning || got.WorkerID != "w1" || got.ClaimSeq != 7 {
		t.Fatalf("job %s: %s on %q by claim %d; want running on w1 by claim 7", j.ID, got.Status, got.WorkerID, got.ClaimSeq)
	}
	hb := `{"jobs":[],"claims_from":7,"claims_to":7}`
	if code, werr := e.do(http.MethodPost, "/workers/w1/heartbeat", hb, nil); code >= 300 {
		t.Fatalf("heartbeat: %d %+v", code, werr)
	}
	got = e.job(j.ID)
	if n := len(got.History); got.Status != store.StatusPending || got.Attempts != 0 || n == 0 || got.History[n-1].Status != store.StatusReturned {
		t.Fatalf("after the heartbeat naming claim 7: %s, %d attempts, history %+v; want pending, 0 attempts, the attempt returned", got.Status, got.Attempts, got.History)
	}
}

// Only long-polls that carry a lease and a claim number park for a submit:
// the v0 worker API's GET /jobs/next and a claim without claim_seq claim for
// themselves, as before.
func TestHandoffOnlyNumberedClaimsPark(t *testing.T) {
	for _, tc := range []struct {
		name string
		args claimArgs
		want bool
	}{
		{"numbered", claimArgs{wait: time.Second, cmd: fsm.Claim{Fenced: true, Seq: 1}}, true},
		{"no number", claimArgs{wait: time.Second, cmd: fsm.Claim{Fenced: true}}, false},
		{"no lease", claimArgs{wait: time.Second, cmd: fsm.Claim{Seq: 1}}, false},
		{"no wait", claimArgs{cmd: fsm.Claim{Fenced: true, Seq: 1}}, false},
		{"any queue", claimArgs{wait: time.Second, anyQueue: true, cmd: fsm.Claim{Fenced: true, Seq: 1}}, false},
	} {
		if got := parks(&tc.args, tc.args.wait); got != tc.want {
			t.Errorf("%s: parks = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A claim that carries a report, with a job ready for it, puts the report
// and the claim in one log entry, the report first.
func TestClaimCarryingAReportIsOneEntry(t *testing.T) {
	e := newHandoffEnv(t)
	first, second := e.submit("q"), e.submit("q")
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","queues":["q"],"shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("first claim: %d %+v %+v", code, werr, cr)
	}
	before := e.node.Index()
	body := fmt.Sprintf(`{"worker_id":"w1","queues":["q"],"shell":true,"reports":[{"job_id":%q,"status":"done","lease":%d,"exit_code":0}]}`, cr.Jobs[0].ID, cr.Jobs[0].Lease)
	cr = wire.ClaimResponse{}
	if code, werr := e.do(http.MethodPost, "/jobs/claim", body, &cr); code != http.StatusOK {
		t.Fatalf("claim with a report: %d %+v", code, werr)
	}
	if len(cr.Reports) != 1 || cr.Reports[0].Status != wire.StatusDone || len(cr.Jobs) != 1 || cr.Jobs[0].ID != second.ID {
		t.Fatalf("reply %+v, want %s done and %s claimed", cr, first.ID, second.ID)
	}
	if after := e.node.Index(); after != before+1 {
		t.Fatalf("report and claim took entries %d..%d, want one", before+1, after)
	}
	if got := e.node.proposed(); len(got) != 1 || fmt.Sprint(got[0]) != "[report claim]" {
		t.Fatalf("groups proposed: %v, want one of report then claim", got)
	}
}

// A claim that carries a report and finds nothing to claim (the Go
// worker's, which does not wait: "wait":"0s") waits while its report is
// being committed, as a long-poll does: a job submitted meanwhile is handed
// to it in the submit's entry, rather than left for the worker's next poll.
func TestClaimCarryingAReportIsHandedAJobWhileItsReportCommits(t *testing.T) {
	e := newHandoffEnv(t)
	first := e.submit("q")
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","queues":["q"],"shell":true,"claim_seq":1}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("first claim: %d %+v %+v", code, werr, cr)
	}
	release := make(chan struct{})
	e.node.mu.Lock()
	e.node.beforeAll = func(cmds []fsm.Cmd) {
		if len(cmds) > 0 && cmds[0].Op == fsm.OpReport {
			<-release // the report's commit is slow
		}
	}
	e.node.mu.Unlock()
	body := fmt.Sprintf(`{"worker_id":"w1","queues":["q"],"shell":true,"claim_seq":2,"wait":"0s","reports":[{"job_id":%q,"status":"done","lease":%d,"exit_code":0}]}`, first.ID, cr.Jobs[0].Lease)
	out := make(chan wire.ClaimResponse, 1)
	go func() {
		var cr wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", body, &cr); code != http.StatusOK {
			t.Errorf("claim with a report: %d %+v", code, werr)
		}
		out <- cr
	}()
	e.waitParked(1)
	second := e.submit("q")
	close(release)
	cr = <-out
	if len(cr.Reports) != 1 || cr.Reports[0].Status != wire.StatusDone || len(cr.Jobs) != 1 || cr.Jobs[0].ID != second.ID {
		t.Fatalf("reply %+v, want %s done and %s claimed", cr, first.ID, second.ID)
	}
	if got := e.node.proposed(); len(got) != 1 || fmt.Sprint(got[0]) != "[submit claim]" {
		t.Fatalf("groups proposed: %v, want the submit with the claim", got)
	}
}

// A long-poll that wakes to look again (here: a claim in flight ended)
// and finds nothing stays parked: it is never off the waiters while it
// looks, so a submit then still hands it the job in the submit's entry.
func TestHandoffPollStaysParkedWhenItWakes(t *testing.T) {
	e := newHandoffEnv(t)
	reply := e.parkClaim(context.Background(), "w1", "q", 1)
	if got := e.srv.waiters.Parks(); got != 1 {
		t.Fatalf("parks = %d, want 1", got)
	}
	if !e.srv.claiming.Acquire(1) {
		t.Fatal("the claim gate is full")
	}
	e.srv.claiming.Release() // wakes the poll, which then looks again
	poll.Wait(t, 10*time.Second, time.Millisecond, func() error {
		if !e.srv.claiming.Watched() {
			return fmt.Errorf("the poll has not looked again")
		}
		return nil
	})
	j := e.submit("q")
	if cr := <-reply; len(cr.Jobs) != 1 || cr.Jobs[0].ID != j.ID {
		t.Fatalf("reply %+v, want %s", cr, j.ID)
	}
	if got := e.node.proposed(); len(got) != 1 || fmt.Sprint(got[0]) != "[submit claim]" {
		t.Fatalf("groups proposed: %v, want the submit with the claim", got)
	}
	if got := e.srv.waiters.Parks(); got != 1 {
		t.Fatalf("parks = %d, want 1: the poll left the waiters when it woke", got)
	}
}

// A batch submit hands one job to each parked long-poll of its queue, up to
// dispatch.MaxHandoffs, all in the entry of the submit.
func TestHandoffBatchTakesOneWaiterPerJob(t *testing.T) {
	e := newHandoffEnv(t)
	replies := []<-chan wire.ClaimResponse{e.parkClaim(context.Background(), "w1", "q", 1), e.parkClaim(context.Background(), "w2", "q", 1)}
	var out wire.JobList
	body := `{"jobs":[{"command":"a","queue":"q"},{"command":"b","queue":"q","run_at":"2030-01-01T00:00:00Z"},{"command":"c","queue":"q"}]}`
	if code, werr := e.do(http.MethodPost, "/jobs/batch", body, &out); code != http.StatusCreated {
		t.Fatalf("batch: %d %+v", code, werr)
	}
	if got := e.node.proposed(); len(got) != 1 || fmt.Sprint(got[0]) != "[submit claim claim]" {
		t.Fatalf("groups proposed: %v, want one of the submit and two claims", got)
	}
	got := map[string]bool{}
	for _, r := range replies {
		cr := <-r
		if len(cr.Jobs) != 1 {
			t.Fatalf("a parked claim got %+v, want one job", cr.Jobs)
		}
		got[cr.Jobs[0].ID] = true
	}
	if !got[out.Jobs[0].ID] || !got[out.Jobs[2].ID] {
		t.Fatalf("claimed %v, want the two jobs due now (%s, %s)", got, out.Jobs[0].ID, out.Jobs[2].ID)
	}
	if n := len(takeN(e, dispatch.MaxHandoffs+5)); n != dispatch.MaxHandoffs {
		t.Fatalf("a batch of %d due jobs took %d waiters, want dispatch.MaxHandoffs (%d)", dispatch.MaxHandoffs+5, n, dispatch.MaxHandoffs)
	}
}

// takeN parks n waiters on queue q directly and lets a batch of n due jobs
// take them; it returns those taken and unparks the rest.
func takeN(e *handoffEnv, n int) []*dispatch.Waiter {
	jobs := make([]fsm.NewJob, n)
	parked := make([]*dispatch.Waiter, n)
	for i := range jobs {
		jobs[i] = fsm.NewJob{Queue: "q"}
		parked[i] = e.srv.waiters.Park(fsm.Claim{Queues: []string{"q"}})
	}
	taken := e.srv.waiters.TakeFor(jobs, e.srv.now())
	for _, w := range parked {
		e.srv.waiters.Leave(w) // the taken ones stay taken
	}
	return taken
}

// upgradingNode refuses the first group that carries a claim as needing a
// newer protocol than the cluster runs: a member turned out older after
// the waiter made its claim.
type upgradingNode struct {
	*groupNode
	refused atomic.Int32
}

func (n *upgradingNode) ProposeTogether(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, error) {
	if len(cmds) > 1 && cmds[1].Op == fsm.OpClaim && n.refused.Add(1) == 1 {
		return nil, &raftnode.NeedsUpgradeError{Op: fsm.OpClaim, Need: fsm.ProtocolVersion, Cluster: 1}
	}
	return n.groupNode.ProposeTogether(ctx, cmds)
}

// A submit whose entry would carry a waiting worker's claim is not refused
// when the claim is (503 upgrade_in_progress): the submit is proposed
// alone, and the worker waits on and gets the job.
func TestHandoffRefusedClaimDoesNotCostTheSubmit(t *testing.T) {
	var node *upgradingNode
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), func(c *Config) {
		node = &upgradingNode{groupNode: &groupNode{loneNode: c.Node.(*loneNode)}}
		c.Node = node
		c.MaxWait = time.Minute
	})
	he := &handoffEnv{schedEnv: e, node: node.groupNode}
	reply := he.parkClaim(context.Background(), "w1", "q", 1)
	j := he.submit("q") // fails the test on anything but 201
	if node.refused.Load() != 1 {
		t.Fatalf("the submit's group with the claim was proposed %d times, want it refused once", node.refused.Load())
	}
	cr := <-reply // the waiter claims the job itself
	if len(cr.Jobs) != 1 || cr.Jobs[0].ID != j.ID {
		t.Fatalf("the waiting claim got %+v, want job %s", cr.Jobs, j.ID)
	}
}
