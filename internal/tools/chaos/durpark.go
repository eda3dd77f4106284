package chaos

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/workron/workron/api/wire"
)

// The checks of the durable jobs' parking calls (durable.go): a sleep, a
// wait for an event, an invoke of a child job.

// findStep is the step key of a journal, or nil.
func findStep(steps []wire.Step, key string) *wire.Step {
	for i := range steps {
		if steps[i].Key == key {
			return &steps[i]
		}
	}
	return nil
}

// parkKey is the key of the handler's call of kind.
func parkKey(kind string) string {
	return callKeys(func(c durableCall) bool { return c.kind == kind })[0]
}

// attemptStart is when the attempt of job j with lease began, by the
// log's clock (the claim's entry), and whether the job shows it.
func attemptStart(j wire.Job, lease uint64) (time.Time, bool) {
	for _, a := range j.AttemptHistory {
		if a.Lease == lease && !a.Started.IsZero() {
			return a.Started, true
		}
	}
	if j.Lease == lease && j.StartedAt != nil {
		return *j.StartedAt, true
	}
	return time.Time{}, false
}

// checkSleeps: no sleep woke twice or never, nor early. Each job's sleep
// step is recorded ok with its wake time; the first attempt whose code
// after the sleep ran (a woke line) was claimed at or after the wake
// time, both by the log's clock; no attempt parked on the sleep after
// one got past it; every job that ended done got past it.
func checkSleeps(in durableInput, jobs map[string]wire.Job, res *durableResult) {
	key := parkKey(wire.StepSleep)
	firstWoke := make(map[string]ledgerLine)
	for _, l := range in.ledger {
		if l.Key != key {
			continue
		}
		j, ok := jobs[l.Job]
		if !ok {
			continue // checkLedger reports it
		}
		st := findStep(in.journals[l.Job], key)
		woke, already := firstWoke[l.Job]
		switch l.T {
		case ledgerWoke:
			if already {
				continue
			}
			firstWoke[l.Job] = l
			res.Sleeps++
			if st == nil || st.WakeAt == nil {
				res.anomaly("durable job %s: the code after sleep %s ran (attempt %d, lease %d), but the journal holds no such sleep", l.Job, key, l.Attempt, l.Lease)
				continue
			}
			if began, ok := attemptStart(j, l.Lease); ok && began.Before(*st.WakeAt) {
				res.anomaly("durable job %s: sleep %s woke early: the attempt past it (lease %d) was claimed at %s, before its wake time %s",
					l.Job, key, l.Lease, began.Format(time.RFC3339Nano), st.WakeAt.Format(time.RFC3339Nano))
			}
		case ledgerPark:
			// An older attempt's park line may come after: the late
			// answer to its resent call, which parked before the wake.
			if already && (later(l, stepResult{Lease: woke.Lease, Attempt: woke.Attempt}) || l.Lease != 0 && l.Lease == woke.Lease) {
				res.anomaly("durable job %s: sleep %s woke twice: attempt %d (lease %d) parked on it after attempt %d (lease %d) had got past it",
					l.Job, key, l.Attempt, l.Lease, woke.Attempt, woke.Lease)
			}
		}
	}
	for _, id := range sortedKeys(in.journals) {
		st := findStep(in.journals[id], key)
		if st != nil && (st.Status != wire.StepOK || st.WakeAt == nil) {
			res.anomaly("durable job %s: sleep %s recorded %s, wake time %v: a sleep is recorded ok with its wake time", id, key, st.Status, st.WakeAt)
		}
		if j := jobs[id]; j.Type == durableType && j.Status == wire.StatusDone {
			if _, ok := firstWoke[id]; !ok {
				res.anomaly("durable job %s ended done, but the code after its sleep %s never ran", id, key)
			}
		}
	}
}

// checkWaits: no event sent was missed. A wait that got no event timed
// out only if none was sent for its key (the jobs that get one wait 3
// hours); a wait got the event of its own key, and the first one sent
// (the rescue the harness sends after healing only wakes a wait whose
// event was lost), unless a clock jump could have dropped it from the
// look-back window; and the ledger agrees with the journal.
func checkWaits(in durableInput, byKey map[string]wire.Job, res *durableResult) {
	key := parkKey(wire.StepWait)
	began := make(map[string]int64) // job -> when its first wait began
	heard := make(map[string]int64) // job -> when its first wait returned
	for _, l := range in.ledger {
		if l.Key != key {
			continue
		}
		switch l.T {
		case ledgerWait:
			if _, ok := began[l.Job]; !ok {
				began[l.Job] = l.At
			}
		case ledgerHeard:
			if _, ok := heard[l.Job]; !ok {
				heard[l.Job] = l.At
			}
			st := findStep(in.journals[l.Job], key)
			if st == nil {
				res.anomaly("durable job %s: wait %s returned to attempt %d (lease %d), but the journal holds no such wait", l.Job, key, l.Attempt, l.Lease)
				continue
			}
			var p eventPayload
			_ = json.Unmarshal(st.Result, &p)
			if l.Heard != (st.Status == wire.StepOK) || l.N != p.N {
				res.anomaly("durable job %s: wait %s returned heard=%v event %d to attempt %d (lease %d), but the journal records %s with %s",
					l.Job, key, l.Heard, l.N, l.Attempt, l.Lease, st.Status, st.Result)
			}
		}
	}
	for _, k := range sortedKeys(byKey) {
		j := byKey[k]
		st := findStep(in.journals[j.ID], key)
		if st == nil || (st.Status != wire.StepOK && st.Status != wire.StepTimeout) {
			continue // not waited yet: checkDone and the status checks report it
		}
		mode, evKey := j.Metadata["event"], j.Metadata["event_key"]
		ev := in.events[evKey]
		end, ok := heard[j.ID]
		if !ok {
			end = math.MaxInt64
		}
		excused := ev.Return != 0 && jumped(in.clockJumps, ev.Call, end)
		if st.Status == wire.StepTimeout {
			switch {
			case mode == eventNone:
				res.TimedOut++
			case ev.Return == 0:
				res.TimedOut++ // its event never got a 2xx: it may not exist
			case excused:
				res.Excused++
			default:
				res.anomaly("durable job %s: wait %s timed out, but its event (key %s) was sent and accepted within its 3-hour window", j.ID, key, evKey)
			}
			continue
		}
		var p eventPayload
		if err := json.Unmarshal(st.Result, &p); err != nil || p.Key != evKey {
			res.anomaly("durable job %s: wait %s for key %s got %s, not its event", j.ID, key, evKey, st.Result)
			continue
		}
		switch {
		case mode == eventNone:
			res.anomaly("durable job %s: wait %s got event %d for key %s, which nobody sent", j.ID, key, p.N, evKey)
		case p.N == 1:
			res.Heard++
			if b, ok := began[j.ID]; ok && ev.Return != 0 && ev.Return < b {
				res.Before++
			}
		case ev.Return == 0 || excused:
			res.Excused++
		default:
			res.anomaly("durable job %s: wait %s missed its event (key %s, accepted %s): it got the rescue the harness sent after healing",
				j.ID, key, evKey, time.Unix(0, ev.Return).UTC().Format(time.RFC3339Nano))
		}
	}
}

// jumped reports whether a clock jump overlapped [from, to].
func jumped(jumps [][2]int64, from, to int64) bool {
	return slices.ContainsFunc(jumps, func(s [2]int64) bool { return s[0] <= to && s[1] >= from })
}

// checkChildren: each child submitted once. A parent has at most one
// child job; its invoke step names it; the step's result is the child's
// (a run the child's handler made); the ledger's spawned lines agree; and
// every child belongs to a parent that invoked it and finished.
func checkChildren(in durableInput, jobs map[string]wire.Job, children []wire.Job, res *durableResult) {
	key := parkKey(wire.StepInvoke)
	childRuns := make(map[string][]string) // child -> its runs
	for _, l := range in.ledger {
		if l.T == ledgerChild {
			childRuns[l.Job] = append(childRuns[l.Job], l.Run)
		}
	}
	byParent := make(map[string][]string)
	for _, c := range children {
		res.Children++
		p := c.Metadata["parent"]
		byParent[p] = append(byParent[p], c.ID)
		switch c.Status {
		case wire.StatusDone, wire.StatusFailed, wire.StatusScheduled:
		default:
			res.anomaly("durable job %s's child %s is still %s after quiescence", p, c.ID, c.Status)
		}
		st := findStep(in.journals[p], key)
		if _, ok := jobs[p]; !ok || st == nil || st.ChildID != c.ID {
			res.anomaly("child job %s of %s: no invoke step of its parent names it", c.ID, p)
		}
	}
	for _, p := range sortedKeys(byParent) {
		if ids := byParent[p]; len(ids) > 1 {
			res.anomaly("durable job %s: its child was submitted %d times: %v", p, len(ids), ids)
		}
	}
	recorded := make(map[string]childResult) // parent -> its invoke's result
	for _, id := range sortedKeys(in.journals) {
		st := findStep(in.journals[id], key)
		if st == nil {
			continue
		}
		c, ok := jobs[st.ChildID]
		switch {
		case !ok:
			res.anomaly("durable job %s: invoke %s names child %q, which the cluster does not list", id, key, st.ChildID)
			continue
		case st.Status == wire.StepOK:
			var r childResult
			if err := json.Unmarshal(st.Result, &r); err != nil || r.Child != st.ChildID || !slices.Contains(childRuns[r.Child], r.Run) {
				res.anomaly("durable job %s: invoke %s recorded %s, not a run of its child %s", id, key, st.Result, st.ChildID)
			}
			if c.Status != wire.StatusDone {
				res.anomaly("durable job %s: invoke %s recorded ok, but its child %s is %s", id, key, st.ChildID, c.Status)
			}
			recorded[id] = r
		case st.Status == wire.StepFailed:
			if c.Status == wire.StatusDone {
				res.anomaly("durable job %s: invoke %s recorded failed, but its child %s ended done", id, key, st.ChildID)
			}
		}
	}
	for _, l := range in.ledger {
		if l.T != ledgerSpawned {
			continue
		}
		if r, ok := recorded[l.Job]; !ok || r.Child != l.Child || r.Run != l.Run {
			res.anomaly("durable job %s: invoke %s returned child %s run %s to attempt %d (lease %d), but the journal records %+v",
				l.Job, key, l.Child, l.Run, l.Attempt, l.Lease, r)
		}
	}
}
