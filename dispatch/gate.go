package dispatch

import (
	"sync"
	"sync/atomic"
)

// Gate keeps the long-polls of one leader from sending many more claims
// than there are jobs: when a job arrives every parked worker wakes, but
// only as many claims as there are claimable jobs go out at once; the
// others wait for one of them to finish (Finished), then look again. The
// zero Gate is ready to use.
type Gate struct {
	inflight atomic.Int64
	mu       sync.Mutex
	done     chan struct{} // closed when a claim in flight finishes
}

// Acquire takes a slot if fewer than ready claims are in flight; the
// caller that got one calls Release when its claim is answered.
func (g *Gate) Acquire(ready int) bool {
	for {
		n := g.inflight.Load()
		if n >= int64(ready) {
			return false
		}
		if g.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release frees a slot and wakes the polls waiting for one.
func (g *Gate) Release() {
	g.inflight.Add(-1)
	g.mu.Lock()
	if g.done != nil {
		close(g.done)
		g.done = nil
	}
	g.mu.Unlock()
}

// Finished returns a channel closed when the next claim in flight
// finishes.
func (g *Gate) Finished() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
	}
	return g.done
}

// Watched reports whether a channel from Finished is still open, that is
// whether some poll may be waiting for a claim in flight to finish (tests
// use it to know a poll found the gate full).
func (g *Gate) Watched() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done != nil
}
