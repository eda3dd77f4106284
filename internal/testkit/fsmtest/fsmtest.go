// Package fsmtest gives tests a real FSM without Raft: a store in the
// test's temporary directory, a clock that moves only when told, and an
// applier that applies each proposed command at once, stamped with that
// clock, as a one-node cluster's leader would. It owns nothing of the
// scheduler's rules and never runs outside tests.
package fsmtest

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

// Clock is a clock that moves only when told; safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// Applier is a real FSM that applies each proposed command at once, in an
// entry of its own stamped with Clock.
type Applier struct {
	FSM   *fsm.FSM
	Clock *Clock

	mu    sync.Mutex
	index uint64
}

// NewApplier opens a store in t.TempDir and an FSM over it, starting the
// clock at start. At cleanup it checks the store's indexes and closes it.
func NewApplier(t testing.TB, start time.Time) *Applier {
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
	return &Applier{FSM: f, Clock: NewClock(start)}
}

// Propose applies cmd at once and returns its result; a refusal is both
// the result's Err and the error, as raftnode's Propose returns it.
func (a *Applier) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	res, err := a.ProposeTogether(ctx, []fsm.Cmd{cmd})
	if err != nil {
		return fsm.Result{}, err
	}
	return res[0], res[0].Err
}

// ProposeTogether applies cmds as one entry, in order, as raftnode's
// ProposeTogether does: the error is the entry's, each command's rejection
// is in its Result.Err.
func (a *Applier) ProposeTogether(_ context.Context, cmds []fsm.Cmd) ([]fsm.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	data, err := fsm.Encode(&fsm.Entry{Now: a.Clock.Now().UnixNano(), Cmds: cmds})
	if err != nil {
		return nil, err
	}
	a.index++
	out := a.FSM.ApplyBatch([]*raft.Log{{Index: a.index, Type: raft.LogCommand, Data: data}})
	return out[0].([]fsm.Result), nil
}

// Index is the index of the last entry applied: how many commands were
// proposed so far.
func (a *Applier) Index() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.index
}

// Time parses an RFC 3339 time, failing the test if it does not parse.
func Time(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
