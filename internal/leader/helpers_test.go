package leader

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// testClock is a clock that moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *testClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// env is a real FSM over a store in t.TempDir, with a proposer that
// applies each command at once, stamped with the test clock: a one-node
// cluster without Raft, enough for the loops.
type env struct {
	t     *testing.T
	clock *testClock
	f     *fsm.FSM
	rec   *recorder

	mu       sync.Mutex
	index    uint64
	proposed int
}

func newEnv(t *testing.T, start time.Time) *env {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsm.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Check(); err != nil {
			t.Errorf("store check at cleanup: %v", err)
		}
		st.Close()
	})
	return &env{t: t, clock: &testClock{now: start}, f: f, rec: &recorder{}}
}

// Propose applies cmd at once, as the leader's Raft would.
func (e *env) Propose(_ context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	data, err := fsm.Encode(&fsm.Entry{Now: e.clock.Now().UnixNano(), Cmds: []fsm.Cmd{cmd}})
	if err != nil {
		return fsm.Result{}, err
	}
	e.index++
	e.proposed++
	out := e.f.ApplyBatch([]*raft.Log{{Index: e.index, Type: raft.LogCommand, Data: data}})
	res := out[0].([]fsm.Result)[0]
	return res, res.Err
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
func (e *env) proposals() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proposed
}

// recorder counts what the loops report.
type recorder struct {
	mu            sync.Mutex
	ended, fired  int
	expiredEnding int
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
