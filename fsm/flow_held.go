package fsm

// heldClock measures how long a queue, or a key, held its due jobs back
// (at a limit, out of tokens, or paused by a rate-limited attempt): held is the time it held them before since, and since is when its
// current hold began (0: it holds none back now). A key's clock counts only
// the time its queue did not hold the jobs too, so that a job's time held
// is its queue's clock plus its key's, each read when the job became due
// and when it was claimed: qAt is the queue's clock when the key's hold
// began.
//
// A delayed job is indexed as due by the first claim after its run time;
// it reads the clocks at its run time, and before a hold ends the due
// jobs are indexed (holdEnds), so that none misses a hold it was due in.
// A hold of a current segment read before its start counts as none.
//
// The clocks are in memory: a node counts from its last start or restore,
// and a job that was due then counts from then. Their readings only go to
// the leader's metrics (Result.Held), never into the store.
type heldClock struct {
	held, since, qAt int64
}

// queueClock is the time queue q has held its jobs back, as of t (at most
// fx.now).
func (fx *flowIndex) queueClock(q string, t int64) int64 {
	c := fx.qHeld[q]
	if c.since != 0 && t > c.since {
		return c.held + t - c.since
	}
	return c.held
}

// heldFor is the clock a job of queue q and key reads at t: the time its
// queue held jobs back, plus the time its key did while the queue did not.
func (fx *flowIndex) heldFor(q, key string, t int64) int64 {
	qc := fx.queueClock(q, t)
	if key == "" {
		return qc
	}
	c := fx.kHeld[qkey{q, key}]
	if c.since != 0 && t > c.since {
		return qc + c.held + max((t-c.since)-(qc-c.qAt), 0)
	}
	return qc + c.held
}

// holdEnds indexes the delayed jobs due by now before a queue's or a key's
// hold may end, so that they read its clock while it runs.
func (x *index) holdEnds() { x.promote(x.flow.now) }

// queueMoved starts or stops q's clock, at end, if the queue's hold
// changed from was.
func (fx *flowIndex) queueMoved(q string, was bool, end int64) {
	now := fx.queueHeld(q)
	if now == was {
		return
	}
	c := fx.qHeld[q]
	if now {
		c.since = fx.now
	} else {
		c.held, c.since = c.held+max(end-c.since, 0), 0
	}
	fx.qHeld[q] = c
}

// keyHeld starts (closed) or stops k's clock, at end. A key that opens
// with no due jobs forgets its clock: no job's reading refers to it.
func (fx *flowIndex) keyHeld(k qkey, closed bool, end int64) {
	c := fx.kHeld[k]
	switch {
	case closed:
		c.since, c.qAt = fx.now, fx.queueClock(k.queue, fx.now)
	case fx.keyReady[k] == 0:
		delete(fx.kHeld, k)
		return
	default:
		c.held = fx.heldFor(k.queue, k.key, end) - fx.queueClock(k.queue, end)
		c.since, c.qAt = 0, 0
	}
	fx.kHeld[k] = c
}

// heldTime is how long limits held a job back that is being claimed at
// fx.now: its clock now less its clock when it became due, at most its
// time since its run time.
func (x *index) heldTime(it readyItem) int64 {
	fx := x.flow
	d := fx.heldFor(x.queueOf(it), x.keyOf(it), fx.now) - it.heldBase
	return max(min(d, fx.now-it.runAt), 0)
}

// noteHeld records, before the claim takes it, how long limits or pauses
// held back a job of a queue with limits (or of one without, that has just
// lost them or whose pause held the job).
func (a *applier) noteHeld(it readyItem, id string) {
	d := a.f.idx.heldTime(it)
	if a.f.idx.flow.limits[a.f.idx.queueOf(it)] == nil && d == 0 {
		return
	}
	if a.held == nil {
		a.held = make(map[string]int64)
	}
	a.held[id] = d
}
