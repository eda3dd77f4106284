package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/fsmtest"
	"github.com/workron/workron/store"
)

// env is a real FSM with a proposer that applies each command at once,
// stamped with the test clock (fsmtest.Applier): a one-node cluster
// without Raft, enough for the loops.
type env struct {
	*fsmtest.Applier
	t     *testing.T
	clock *fsmtest.Clock
	f     *fsm.FSM
	rec   *recorder
}

func newEnv(t *testing.T, start time.Time) *env {
	t.Helper()
	a := fsmtest.NewApplier(t, start)
	return &env{Applier: a, t: t, clock: a.Clock, f: a.FSM, rec: &recorder{}}
}

// propose applies cmd and fails the test if the FSM refuses it.
func (e *env) propose(cmd fsm.Cmd) fsm.Result {
	e.t.Helper()
	res, err := e.Propose(context.Background(), cmd)
	if err != nil {
		e.t.Fatalf("%s: %v", cmd.Op, err)
	}
	return res
}

// proposals is how many commands were proposed so far.
func (e *env) proposals() int { return int(e.Index()) }

// recorder counts what the loops report. With trace set, TraceFire gives
// each fire that trace and notes the outcomes it is told.
type recorder struct {
	mu            sync.Mutex
	ended, fired  int
	expiredEnding int
	trace         string
	fireEnds      []error
}

func (r *recorder) TraceFire(_ context.Context, _ *store.Schedule, f *fsm.Fire) func(fsm.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f.TraceParent = r.trace
	return func(_ fsm.Result, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.fireEnds = append(r.fireEnds, err)
	}
}

func (r *recorder) AttemptEnded(_ context.Context, _ *store.Job, expired bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended++
	if expired {
		r.expiredEnding++
	}
}

func (r *recorder) JobFired(*store.Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fired++
}

// everyoneActive counts every worker alive.
type everyoneActive struct{}

func (everyoneActive) Active(*store.Worker, time.Time) bool { return true }
func (everyoneActive) LastSeen(w *store.Worker) time.Time   { return time.Unix(0, w.LastHeartbeat) }
