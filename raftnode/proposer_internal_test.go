package raftnode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/poll"
)

// heldLeader is a lone leader whose log write can be held, so that one
// entry stays in flight for as long as a test wants.
type heldLeader struct {
	*Node
	holding atomic.Bool
	once    sync.Once
	entered chan struct{} // closed when the held write has begun
	release chan struct{} // closed to let it go on
}

func openHeldLeader(t *testing.T, mutate func(*Config)) *heldLeader {
	t.Helper()
	h := &heldLeader{entered: make(chan struct{}), release: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.ID, cfg.RaftAddr, cfg.DataDir, cfg.Bootstrap = "n1", "127.0.0.1:0", filepath.Join(t.TempDir(), "n1"), true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
	cfg.RaftLogLevel = "OFF"
	cfg.BeforeLogWrite = func() {
		if h.holding.Load() {
			h.once.Do(func() {
				close(h.entered)
				<-h.release
			})
		}
	}
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Node = n
	t.Cleanup(func() {
		h.letGo()
		if err := n.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	poll.Wait(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !n.IsLeader() {
			return errors.New("not leader yet")
		}
		return nil
	})
	if _, err := n.Propose(context.Background(), submitOf(1)); err != nil { // past the writes of gaining leadership
		t.Fatal(err)
	}
	return h
}

// holdOne proposes a submit whose log write is held until letGo, and
// returns once the write has begun: one entry in flight. The submit's
// outcome arrives on the channel.
func (h *heldLeader) holdOne(t *testing.T) <-chan outcome {
	t.Helper()
	h.holding.Store(true)
	p := newProposal(submitOf(1))
	h.enqueueTaken(t, p)
	<-h.entered
	return p.done
}

func (h *heldLeader) letGo() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// finishHeld lets the held write go on and waits until its proposal is
// applied.
func (h *heldLeader) finishHeld(t *testing.T, held <-chan outcome) {
	t.Helper()
	h.letGo()
	if o := <-held; o.err != nil {
		t.Fatal(o.err)
	}
}

// waitEntries waits until the node has proposed n entries in all.
func (h *heldLeader) waitEntries(t *testing.T, n uint64) {
	// At least n: the node's own entries (its address, a no-op of a new
	// term) may land beside the ones a test proposes on a busy machine.
	t.Helper()
	poll.Wait(t, 5*time.Second, time.Millisecond, func() error {
		if got := h.Stats().Entries; got < n {
			return fmt.Errorf("%d entries proposed, want %d", got, n)
		}
		return nil
	})
}

// enqueueTaken queues p and waits until the proposer has taken it.
func (h *heldLeader) enqueueTaken(t *testing.T, p *proposal) {
	t.Helper()
	if err := h.enqueue(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	poll.Wait(t, 5*time.Second, time.Millisecond, func() error {
		if q := len(h.proposals); q > 0 {
			return fmt.Errorf("%d proposals still queued: the proposer does not take them", q)
		}
		return nil
	})
}

// submitOf is a submit of jobs jobs.
func submitOf(jobs int) fsm.Cmd {
	s := &fsm.Submit{Jobs: make([]fsm.NewJob, jobs)}
	for i := range s.Jobs {
		s.Jobs[i].Command = "a"
	}
	return fsm.Cmd{Op: fsm.OpSubmit, Submit: s}
}

// appliedAt waits for p's outcome and returns the index of the entry
// that applied its (submit) command.
func (h *heldLeader) appliedAt(t *testing.T, p *proposal) uint64 {
	t.Helper()
	res, err := h.await(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res[0].Jobs[0].ModifyIndex
}

// goesOut is runProposer's rule: with nothing in flight, or callers
// coming one at a time (the last entry carried one caller's commands), an
// entry goes out at once; once the last entry carried several callers',
// a small entry waits beside one in flight until one has finished, and a
// full one (MaxBatch commands, a group that did not fit, MaxBatch jobs
// submitted) goes out beside it.
func TestProposerGoesOut(t *testing.T) {
	cfg := Config{MaxBatch: 4, MaxInflight: 2}
	gather := func(ps ...*proposal) *gathering {
		g := &gathering{}
		for _, p := range ps {
			g.add(p, cfg.MaxBatch)
		}
		return g
	}
	one := func() *proposal { return newProposal(submitOf(1)) }
	following := func() *proposal { p := one(); p.follows = true; return p }
	twoCallers := func() *gathering { return gather(one(), one()) }
	waited := twoCallers()
	waited.waited = true
	for _, c := range []struct {
		name     string
		g        *gathering
		inflight int
		crowded  bool
		want     bool
	}{
		{"Empty", gather(), 0, false, false},
		{"NothingInFlight", twoCallers(), 0, true, true},
		{"AllSlotsTaken", gather(one(), one(), one(), one()), 2, false, false},
		{"CallersOneAtATime", gather(one()), 1, false, true},
		{"CrowdedSmallWaits", twoCallers(), 1, true, false},
		{"CrowdedWaitedForOne", waited, 1, true, true},
		{"CrowdedFullOfCommands", gather(one(), one(), one(), one()), 1, true, true},
		{"CrowdedGroupDidNotFit", gather(one(), newProposal(submitOf(1), submitOf(1), submitOf(1), submitOf(1))), 1, true, true},
		{"CrowdedBatchSubmit", gather(newProposal(submitOf(4))), 1, true, true},
		{"CrowdedProposeAllBelowFull", gather(one(), following(), following()), 1, true, false},
	} {
		if got := c.g.goesOut(c.inflight, c.crowded, &cfg); got != c.want {
			t.Errorf("%s: goesOut(%d in flight, crowded %v) = %v, want %v", c.name, c.inflight, c.crowded, got, c.want)
		}
	}
	if g := gather(one(), following(), following()); g.callers != 1 {
		t.Errorf("one ProposeAll's proposals count %d callers, want 1", g.callers)
	}
	if g := twoCallers(); g.callers != 2 {
		t.Errorf("two proposals count %d callers, want 2", g.callers)
	}
}

// A caller's proposal goes out beside the entry in flight at once when the
// last entry carried one caller's commands: waiting would gain it nothing.
// With every slot then taken, proposals gather and go out in one entry as
// soon as one finishes.
func TestProposerPacksWhileEntriesAreInFlight(t *testing.T) {
	h := openHeldLeader(t, nil)
	before := h.Stats().Entries
	held := h.holdOne(t)
	beside := newProposal(submitOf(1))
	h.enqueueTaken(t, beside)
	h.waitEntries(t, before+2)

	small := []*proposal{newProposal(submitOf(1)), newProposal(submitOf(1)), newProposal(submitOf(1))}
	for _, p := range small {
		h.enqueueTaken(t, p)
	}
	if d := h.Stats().Entries - before; d != 2 {
		t.Fatalf("%d entries proposed with both slots taken, want 2", d)
	}
	h.finishHeld(t, held)
	first := h.appliedAt(t, beside)
	at := h.appliedAt(t, small[0])
	if at == first {
		t.Errorf("the gathered proposals applied in the entry of the one beside (index %d)", at)
	}
	for i, p := range small[1:] {
		if got := h.appliedAt(t, p); got != at {
			t.Errorf("gathered proposal %d applied at index %d, the first at %d: want one entry", i+1, got, at)
		}
	}
	if d := h.Stats().Entries - before; d != 3 {
		t.Errorf("%d entries proposed, want 3", d)
	}
}

// With MaxInflight 1 nothing goes beside an entry in flight, however
// large: the large proposal waits for the held entry.
func TestProposerMaxInflightOneSendsNothingBeside(t *testing.T) {
	h := openHeldLeader(t, func(c *Config) { c.MaxInflight = 1 })
	before := h.Stats().Entries
	held := h.holdOne(t)

	large := newProposal(submitOf(h.cfg.MaxBatch))
	h.enqueueTaken(t, large)
	if d := h.Stats().Entries - before; d != 1 {
		t.Fatalf("%d entries proposed with MaxInflight 1 and one in flight, want 1", d)
	}
	h.finishHeld(t, held)
	h.appliedAt(t, large)
}

// At shutdown the proposals gathered while every slot is taken are
// answered ErrShutdown, once, before Raft stops; the entry in flight is
// answered by Raft, once. (MaxInflight 1: an entry handed to Raft but not
// yet taken by its leader loop when Raft shuts down is never answered,
// hashicorp/raft#498, and its goroutine would leak.)
func TestProposerShutdownAnswersTheWaitingOnce(t *testing.T) {
	h := openHeldLeader(t, func(c *Config) { c.MaxInflight = 1 })
	held := h.holdOne(t)
	small := []*proposal{newProposal(submitOf(1)), newProposal(submitOf(1))}
	for _, p := range small {
		h.enqueueTaken(t, p)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- h.Shutdown() }()
	<-h.proposerDone
	for i, p := range small {
		select {
		case o := <-p.done:
			if !errors.Is(o.err, ErrShutdown) {
				t.Errorf("gathered proposal %d answered %v, want ErrShutdown", i, o.err)
			}
		default:
			t.Errorf("gathered proposal %d not answered when the proposer stopped", i)
		}
	}
	h.letGo()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if o := <-held; o.err != nil && !errors.Is(o.err, ErrUnknownOutcome) {
		t.Errorf("the entry in flight answered %v, want applied or ErrUnknownOutcome", o.err)
	}
	for i, p := range small {
		select {
		case o := <-p.done:
			t.Errorf("gathered proposal %d answered twice, again with %v", i, o.err)
		default:
		}
	}
	select {
	case o := <-held:
		t.Errorf("the entry in flight answered twice, again with %v", o.err)
	default:
	}
}

// An entry handed to Raft but not yet taken by its leader loop when the
// node shuts down is answered, not left waiting for ever: hashicorp/raft's
// ApplyLog gives its future no shutdown channel (hashicorp/raft#498, still
// so in v1.8.0), so Shutdown lets Raft answer every entry before it stops
// Raft. Without that, whether the leader loop takes the entry or sees the
// shutdown first is up to its select, so the test tries several times.
func TestProposerShutdownAnswersAnEntryRaftHasNotTaken(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			h := openHeldLeader(t, nil)
			held := h.holdOne(t)
			before := h.Stats().Entries
			waiting := newProposal(submitOf(1))
			h.enqueueTaken(t, waiting)
			h.waitEntries(t, before+1) // handed to Raft, whose leader loop is held

			stopped := make(chan error, 1)
			go func() { stopped <- h.Shutdown() }()
			<-h.proposerDone
			h.letGo()
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			for name, done := range map[string]<-chan outcome{"the held entry": held, "the entry Raft had not taken": waiting.done} {
				select {
				case o := <-done:
					if o.err != nil && !errors.Is(o.err, ErrUnknownOutcome) && !errors.Is(o.err, ErrNotLeader) {
						t.Errorf("%s answered %v, want applied, ErrUnknownOutcome or ErrNotLeader", name, o.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s was not answered after the node shut down", name)
				}
			}
		})
	}
}

// A proposal that lands in the queue after the proposer drained it and
// stopped (enqueue raced the shutdown) is answered ErrShutdown once its
// caller sees the proposer gone, not left until the caller's deadline.
func TestProposerAnswersAProposalQueuedAfterItStopped(t *testing.T) {
	h := openHeldLeader(t, nil)
	if err := h.Shutdown(); err != nil {
		t.Fatal(err)
	}
	late := newProposal(submitOf(1))
	h.proposals <- late // as an enqueue that won its race with the shutdown would
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := h.await(ctx, late)
	if !errors.Is(err, ErrShutdown) {
		t.Fatalf("a proposal queued after the proposer stopped: %v, want ErrShutdown", err)
	}
}
