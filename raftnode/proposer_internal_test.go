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
	"github.com/workron/workron/internal/poll"
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
func appliedAt(t *testing.T, p *proposal) uint64 {
	t.Helper()
	res, err := p.await(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res[0].Jobs[0].ModifyIndex
}

// Beside an entry in flight, small proposals wait for it, packed into one
// entry, instead of paying an entry each (MaxInflight 2 used to send the
// first of them at once, alone).
func TestProposerSmallProposalsWaitForTheEntryInFlight(t *testing.T) {
	h := openHeldLeader(t, nil)
	before := h.Stats().Entries
	held := h.holdOne(t)

	small := []*proposal{newProposal(submitOf(1)), newProposal(submitOf(1)), newProposal(submitOf(1))}
	for _, p := range small {
		h.enqueueTaken(t, p)
	}
	if d := h.Stats().Entries - before; d != 1 {
		t.Fatalf("%d entries proposed while one is in flight and small proposals wait, want 1 (the held one)", d)
	}
	h.letGo()
	if o := <-held; o.err != nil {
		t.Fatal(o.err)
	}
	at := appliedAt(t, small[0])
	for i, p := range small[1:] {
		if got := appliedAt(t, p); got != at {
			t.Errorf("small proposal %d applied at index %d, the first at %d: want one entry", i+1, got, at)
		}
	}
	if d := h.Stats().Entries - before; d != 2 {
		t.Errorf("%d entries proposed, want 2: the held one and one for the small proposals", d)
	}
}

// A proposal as large as a full entry (a batch submit of MaxBatch jobs) is
// worth its own entry: it goes out beside the entry in flight at once, and
// takes the small proposals waiting with it.
func TestProposerLargeProposalGoesBesideTheEntryInFlight(t *testing.T) {
	h := openHeldLeader(t, nil)
	before := h.Stats().Entries
	held := h.holdOne(t)

	small := newProposal(submitOf(1))
	h.enqueueTaken(t, small)
	large := newProposal(submitOf(h.cfg.MaxBatch))
	h.enqueueTaken(t, large)
	poll.Wait(t, 5*time.Second, time.Millisecond, func() error {
		if d := h.Stats().Entries - before; d != 2 {
			return fmt.Errorf("%d entries proposed while one is held, want 2: the held one and the large one beside it", d)
		}
		return nil
	})
	h.letGo()
	if o := <-held; o.err != nil {
		t.Fatal(o.err)
	}
	if s, l := appliedAt(t, small), appliedAt(t, large); s != l {
		t.Errorf("the small proposal applied at index %d, the large one at %d: want it packed with the large one", s, l)
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
	h.letGo()
	if o := <-held; o.err != nil {
		t.Fatal(o.err)
	}
	appliedAt(t, large)
}

// At shutdown the proposals waiting beside an entry in flight are answered
// ErrShutdown, once, before Raft stops; the entry in flight is answered
// by Raft, once.
func TestProposerShutdownAnswersTheWaitingOnce(t *testing.T) {
	h := openHeldLeader(t, nil)
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
				t.Errorf("waiting proposal %d answered %v, want ErrShutdown", i, o.err)
			}
		default:
			t.Errorf("waiting proposal %d not answered when the proposer stopped", i)
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
			t.Errorf("waiting proposal %d answered twice, again with %v", i, o.err)
		default:
		}
	}
	select {
	case o := <-held:
		t.Errorf("the entry in flight answered twice, again with %v", o.err)
	default:
	}
}
