package raftnode

import (
	"sync"
	"time"
)

// clusterClock is the time a node stamps into the entries it proposes
// (fsm.Entry.Now) and that its leader loops should read (Node.Now): its own
// clock, but never behind the time the log has reached.
//
// The FSM takes max(entry time, last entry time), so a leader whose clock
// lags (or jumped back) cannot move the state's time backwards; but its
// stamps would then freeze the state's time until its clock caught up, and
// a leader whose loops read a lagging wall clock would not expire leases or
// release retries that the log's time says are due. So on gaining
// leadership (after its Barrier) a node takes max(own clock, the FSM's last
// entry time) as its base and from then on adds the time elapsed on its
// monotonic clock: the log's time goes on at the real rate whatever the
// wall clocks of the nodes say.
type clusterClock struct {
	now func() time.Time

	mu    sync.Mutex
	base  int64     // Unix ns, the cluster time at start
	start time.Time // own clock when base was taken (with its monotonic reading)
	set   bool
}

// Now is the cluster time as this node sees it.
func (c *clusterClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at(c.now())
}

// at is the cluster time when the own clock reads own; c.mu held.
func (c *clusterClock) at(own time.Time) time.Time {
	if !c.set {
		return own
	}
	return time.Unix(0, c.base).Add(own.Sub(c.start))
}

// resync restarts the clock from max(own clock, floor) and returns how far
// floor is ahead of the own clock (0 if it is not).
func (c *clusterClock) resync(floor int64) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now()
	c.base, c.start, c.set = max(t.UnixNano(), floor), t, true
	return time.Duration(max(floor-t.UnixNano(), 0))
}

// ahead is how far the later of the cluster time and logTime (the last
// entry's time: a follower's view of its leader's clock) is ahead of the
// own clock; 0 if neither is.
func (c *clusterClock) ahead(logTime int64) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	own := c.now()
	cluster := max(c.at(own).UnixNano(), logTime)
	return time.Duration(max(cluster-own.UnixNano(), 0))
}

// clockWarnAhead is how far the log's time may be ahead of a new leader's
// clock before it says so: more than the skew of clocks kept by NTP.
const clockWarnAhead = 2 * time.Second
