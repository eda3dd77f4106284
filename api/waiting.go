package api

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

// waitView is what explaining why jobs wait reads, once per request: the
// clock, the workers this node (the leader, for reads) counts as active,
// and the paused queues. The workers are looked at only for a job that
// waits to be placed (pending, or a gang's blocked task), and then from
// the FSM's copy of their records (Server.activeWorkers): reading a
// running or finished job costs nothing per worker.
type waitView struct {
	now     time.Time
	workers []*store.Worker // once loaded
	loaded  bool
	load    func() []*store.Worker
	paused  map[string]bool
	held    func(j *store.Job) string // a flow-control limit holding j back, or ""
	// cascade names a cancelled or failed job above a blocked one whose
	// cascade is under way (fsm.FSM.CascadeAbove)
	cascade func(j *store.Job) (string, store.Status, bool)
}

func (s *Server) waitView() *waitView {
	now := s.cfg.Now()
	v := &waitView{now: now, load: func() []*store.Worker { return s.activeWorkers(now) }, paused: make(map[string]bool), held: s.limitWaiting, cascade: s.state.CascadeAbove}
	for _, q := range s.state.Queues() {
		if q.Paused {
			v.paused[q.Name] = true
		}
	}
	return v
}

// active is the workers active at v.now, loaded at the first call.
func (v *waitView) active() []*store.Worker {
	if !v.loaded {
		v.workers, v.loaded = v.load(), true
	}
	return v.workers
}

// explain fills a shown job's Waiting, WaitingCode and Unschedulable.
func (v *waitView) explain(out *wire.Job, j *store.Job) {
	out.WaitingCode, out.Waiting = v.waiting(j)
	out.Unschedulable = v.unschedulable(j)
}

// explainAll is explain for a list shown in the same order.
func (s *Server) explainAll(out []wire.Job, jobs []*store.Job) {
	if len(jobs) == 0 {
		return
	}
	v := s.waitView()
	for i, j := range jobs {
		v.explain(&out[i], j)
	}
}

// waiting says why a job that is neither running nor finished waits: a code
// (wire.Wait*) and a sentence, or "", "" for a running or finished job.
// The first reason that holds wins, in this order: a dependency, a paused
// queue, no active worker serving the queue, no active worker able to run
// it (resources, tags, a gang's width), a delay (run_at ahead, a retry's
// backoff), a flow-control limit (queues.go), and else it is ready and waits for a worker to take it.
func (v *waitView) waiting(j *store.Job) (code, reason string) {
	code, reason = v.waitingOn(j)
	if r := v.cascadeAbove(j); r != "" {
		return wire.WaitDependency, r + reason
	}
	return code, reason
}

// waitingOn is waiting without the cascades under way.
func (v *waitView) waitingOn(j *store.Job) (code, reason string) {
	switch {
	case j.Status == store.StatusReserved:
		return wire.WaitClaim, fmt.Sprintf("gang %s is placed; waits for worker %s to claim this task", j.GangID, j.WorkerID)
	case j.Status == store.StatusBlocked && j.After != "":
		return wire.WaitDependency, fmt.Sprintf("waits for the previous run %s of schedule %s to end", j.After, j.Schedule)
	case j.Status == store.StatusBlocked && j.Waiting > 0:
		return wire.WaitDependency, fmt.Sprintf("waits for %d of its %d dependencies to succeed: %s", j.Waiting, len(j.DependsOn), strings.Join(j.DependsOn, ", "))
	case j.Status != store.StatusPending && !(j.Status == store.StatusBlocked && j.GangID != ""):
		return "", ""
	}
	if r := parkedReason(j, v.now); r != "" {
		return wire.WaitDelay, r
	}
	if v.paused[j.Queue] {
		return wire.WaitPaused, fmt.Sprintf("queue %s is paused", j.Queue)
	}
	serving := v.serving(j.Queue)
	switch {
	case len(v.active()) == 0:
		return wire.WaitNoWorker, "no worker is active"
	case len(serving) == 0:
		return wire.WaitNoWorker, fmt.Sprintf("no active worker serves queue %s", j.Queue)
	}
	if r := unschedulableReason(j.Resources, j.Tags, max(j.GangSize, 1), serving); r != "" {
		return wire.WaitResources, r + " (of those serving queue " + j.Queue + ")"
	}
	if at := time.Unix(0, j.RunAt); at.After(v.now) {
		when := at.UTC().Format(time.RFC3339)
		if n := len(j.History); n > 0 && j.History[n-1].Status == store.StatusSnoozed {
			return wire.WaitDelay, fmt.Sprintf("snoozed by attempt %d; runs at %s", j.History[n-1].Attempt, when)
		}
		if n := len(j.History); n > 0 && j.Attempts > 0 {
			last := j.History[n-1]
			return wire.WaitDelay, fmt.Sprintf("attempt %d of %d failed (%s); attempt %d runs at %s", last.Attempt, j.MaxAttempts, last.Error, j.Attempts+1, when)
		}
		return wire.WaitDelay, "scheduled for " + when
	}
	if r := v.held(j); r != "" {
		return wire.WaitLimit, r
	}
	if j.GangID != "" {
		return wire.WaitGang, fmt.Sprintf("gang of %d waits until %d fitting workers are free at once", j.GangSize, j.GangSize)
	}
	return wire.WaitWorker, fmt.Sprintf("ready; waits for a worker of queue %s to take it (active workers serving it: %d)", j.Queue, len(serving))
}

// cascadeAbove says a cascade under way will end j, a blocked job, or "".
func (v *waitView) cascadeAbove(j *store.Job) string {
	if v.cascade == nil || j.Status != store.StatusBlocked {
		return ""
	}
	id, st, sure := v.cascade(j)
	switch {
	case id == "":
		return ""
	case sure:
		return fmt.Sprintf("dependency %s is %s: its cascade is under way and will end this job; ", id, st)
	}
	return fmt.Sprintf("the cascade of job %s (%s) is under way and may reach this job; ", id, st)
}

// serving lists the active workers that serve queue q; a worker that named
// no queues (one that claims without registering) may serve any.
func (v *waitView) serving(q string) []*store.Worker {
	var out []*store.Worker
	for _, w := range v.active() {
		if len(w.Queues) == 0 || slices.Contains(w.Queues, q) {
			out = append(out, w)
		}
	}
	return out
}

// parkedReason is why a job parked on a durable step waits (its last
// attempt ended parked, and its run_at is still ahead: the wake time, the
// wait's deadline, or far ahead for a wait without one or an invoke), ""
// for a job not parked: what it waits for is not a worker, whatever the
// workers are. GET /jobs/{id}'s "parked" says on what exactly.
func parkedReason(j *store.Job, now time.Time) string {
	n := len(j.History)
	if n == 0 || j.History[n-1].Status != store.StatusParked || !time.Unix(0, j.RunAt).After(now) {
		return ""
	}
	return fmt.Sprintf("%s (attempt %d); runs again when it wakes (see parked)", j.History[n-1].Error, j.History[n-1].Attempt)
}
