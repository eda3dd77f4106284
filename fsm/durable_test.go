//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func sleepStep(s fsm.SleepStep) fsm.Cmd   { return fsm.Cmd{Op: fsm.OpSleepStep, SleepStep: &s} }
func waitStep(w fsm.WaitStep) fsm.Cmd     { return fsm.Cmd{Op: fsm.OpWaitStep, WaitStep: &w} }
func invokeStep(v fsm.InvokeStep) fsm.Cmd { return fsm.Cmd{Op: fsm.OpInvokeStep, InvokeStep: &v} }
func sendEvent(e fsm.SendEvent) fsm.Cmd   { return fsm.Cmd{Op: fsm.OpSendEvent, SendEvent: &e} }
func event(name, key, payload string) fsm.Cmd {
	return sendEvent(fsm.SendEvent{Name: name, Key: key, Payload: []byte(payload)})
}

// durableJob submits one job and has worker w1 claim it.
func durableJob(t *testing.T) (*harness, *store.Job) {
	h := setup(t)
	h.ok(register(store.Worker{ID: "w1", Slots: 4}))
	h.submit(fsm.NewJob{ID: "order-1", Command: "a", MaxAttempts: 1, Retention: int64(time.Hour)})
	return h, h.claimOne("w1")
}

// step reads a recorded step.
func (h *harness) step(jobID, key string) *store.Step {
	h.t.Helper()
	s, err := h.f.Step(jobID, key)
	if err != nil {
		h.t.Fatalf("step %s of %s: %v", key, jobID, err)
	}
	return s
}

func TestSleepStep(t *testing.T) {
	t.Run("ASleepParksTheJobUnchargedUntilItsWakeTime", func(t *testing.T) {
		h, j := durableJob(t)
		r := h.at(time.Second).ok(sleepStep(fsm.SleepStep{JobID: j.ID, Lease: j.Lease, Key: "nap", For: int64(time.Hour)}))
		wake := ns(t0.Add(time.Second + time.Hour))
		if !r.Parked || r.Step.Status != store.StepOK || r.Step.Kind != store.StepSleep || r.Step.WakeAt != wake {
			t.Fatalf("sleep: parked %v step %+v", r.Parked, r.Step)
		}
		got := h.job(j.ID)
		if got.Status != store.StatusPending || got.RunAt != wake || got.Attempts != 0 || got.History[0].Status != store.StatusParked {
			t.Fatalf("parked job: %s run_at %d attempts %d history %+v", got.Status, got.RunAt, got.Attempts, got.History)
		}
		if p, _ := h.f.Park(j.ID); p == nil || p.Kind != store.StepSleep || p.WakeAt != wake {
			t.Fatalf("Park = %+v", p)
		}
		// The parked attempt's report is refused; nothing runs before the wake.
		h.reject(fail(j.ID, j.Lease, "late"), fsm.ErrStaleLease)
		h.reject(succeed(j.ID, j.Lease), fsm.ErrStaleLease)
		if jobs := h.at(time.Hour).claim(fsm.Claim{WorkerID: "w1"}); len(jobs) != 0 {
			t.Fatalf("claimed %d jobs before the wake time", len(jobs))
		}
		j2 := h.at(time.Second + time.Hour).claimOne("w1")
		if j2.Attempts != 1 {
			t.Fatalf("attempt after the sleep = %d, want 1 (the sleep did not count)", j2.Attempts)
		}
		if p, _ := h.f.Park(j.ID); p != nil {
			t.Fatalf("Park after the wake = %+v", p)
		}
		// The replay gets the recorded sleep back.
		again := h.reject(sleepStep(fsm.SleepStep{JobID: j.ID, Lease: j2.Lease, Key: "nap", For: int64(time.Hour)}), fsm.ErrStepRecorded)
		if again.Step == nil || again.Step.WakeAt != wake {
			t.Fatalf("replay: %+v", again.Step)
		}
		h.ok(succeed(j.ID, j2.Lease))
	})

	t.Run("ASleepWhoseTimePassedDoesNotPark", func(t *testing.T) {
		h, j := durableJob(t)
		r := h.at(time.Minute).ok(sleepStep(fsm.SleepStep{JobID: j.ID, Lease: j.Lease, Key: "nap", Until: ns(t0)}))
		if r.Parked || h.job(j.ID).Status != store.StatusRunning {
			t.Fatalf("a past sleep parked the job")
		}
	})

	t.Run("AStaleLeaseCannotPark", func(t *testing.T) {
		h, j := durableJob(t)
		h.reject(sleepStep(fsm.SleepStep{JobID: j.ID, Lease: j.Lease + 1, Key: "nap", For: 1}), fsm.ErrStaleLease)
		h.reject(sleepStep(fsm.SleepStep{JobID: j.ID, Key: "nap", For: 1}), fsm.ErrLeaseRequired)
		h.reject(waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease + 1, Key: "w", Event: "e"}), fsm.ErrStaleLease)
		h.reject(invokeStep(fsm.InvokeStep{JobID: j.ID, Lease: j.Lease + 1, Key: "i", Child: fsm.NewJob{Command: "c"}}), fsm.ErrStaleLease)
		if _, err := h.f.Step(j.ID, "nap"); !errors.Is(err, fsm.ErrNotFound) {
			t.Fatalf("a refused sleep was recorded: %v", err)
		}
	})

	t.Run("BoundsAreRefused", func(t *testing.T) {
		h, j := durableJob(t)
		var v *fsm.ValidationError
		for _, c := range []fsm.Cmd{
			sleepStep(fsm.SleepStep{JobID: j.ID, Lease: j.Lease, Key: "nap", For: fsm.MaxParkFor + 1}),
			sleepStep(fsm.SleepStep{JobID: j.ID, Lease: j.Lease, Key: "nap", Until: ns(t0.Add(366 * 24 * time.Hour))}),
			sleepStep(fsm.SleepStep{JobID: j.ID, Lease: j.Lease, Key: "a/b", For: 1}),
			waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: "w"}),
			waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: "w", Event: "e", Signal: "s"}),
			waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: "w", Event: "e", Timeout: -1}),
			event("", "k", ""),
			sendEvent(fsm.SendEvent{Name: "e", Payload: make([]byte, fsm.MaxEventPayloadBytes+1)}),
		} {
			if r := h.reject(c, nil); !errors.As(r.Err, &v) {
				t.Errorf("%s: %v, want a ValidationError", c.Op, r.Err)
			}
		}
	})
}

func TestWaitStep(t *testing.T) {
	wait := func(j *store.Job, key string, timeout time.Duration) fsm.Cmd {
		return waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: key, Event: "paid", EventKey: "order-1", Timeout: int64(timeout)})
	}

	t.Run("AnEventWakesTheWaitWithItsPayload", func(t *testing.T) {
		h, j := durableJob(t)
		r := h.ok(wait(j, "pay", time.Hour))
		if !r.Parked || r.Step.Status != store.StepWaiting {
			t.Fatalf("wait: parked %v step %+v", r.Parked, r.Step)
		}
		if got := h.job(j.ID); got.Status != store.StatusPending || got.RunAt != ns(t0.Add(time.Hour)) {
			t.Fatalf("waiting job %s run_at %d", got.Status, got.RunAt)
		}
		// A replay before the event re-parks, it does not 409.
		h.reject(succeed(j.ID, j.Lease), fsm.ErrStaleLease)
		e := h.at(time.Minute).ok(event("paid", "order-1", `{"amount":5}`))
		if e.Woke != 1 || e.Seq != 1 {
			t.Fatalf("event woke %d seq %d", e.Woke, e.Seq)
		}
		if s := h.step(j.ID, "pay"); s.Status != store.StepOK || string(s.Result) != `{"amount":5}` {
			t.Fatalf("step after the event: %+v", s)
		}
		if got := h.job(j.ID); got.RunAt != ns(t0.Add(time.Minute)) {
			t.Fatalf("woken job run_at %d, want now", got.RunAt)
		}
		j2 := h.claimOne("w1")
		again := h.reject(wait(j2, "pay", time.Hour), fsm.ErrStepRecorded)
		if string(again.Step.Result) != `{"amount":5}` {
			t.Fatalf("replay: %+v", again.Step)
		}
	})

	t.Run("AnEventBeforeTheWaitMatchesWithinTheWindowOnly", func(t *testing.T) {
		h, j := durableJob(t)
		h.ok(event("paid", "order-1", `"early"`))
		h.ok(event("paid", "order-1", `"second"`))
		r := h.at(time.Hour - time.Nanosecond).ok(wait(j, "pay", 0))
		if r.Parked || r.Step.Status != store.StepOK || string(r.Step.Result) != `"early"` {
			t.Fatalf("wait after the event: parked %v %+v", r.Parked, r.Step)
		}
		r = h.ok(wait(j, "pay#2", 0))
		if r.Parked || string(r.Step.Result) != `"second"` {
			t.Fatalf("second wait took %+v, want the second event", r.Step)
		}
		if r = h.ok(wait(j, "pay#3", 0)); !r.Parked {
			t.Fatalf("a third wait matched an event consumed already: %+v", r.Step)
		}

		h2, j2 := durableJob(t)
		h2.ok(event("paid", "order-1", `"early"`))
		if r := h2.at(time.Hour).ok(wait(j2, "pay", 0)); !r.Parked {
			t.Fatalf("an event older than the window matched: %+v", r.Step)
		}
	})

	t.Run("TheTimeoutIsDecidedOnceInLogOrder", func(t *testing.T) {
		// The event's entry before the deadline wins.
		h, j := durableJob(t)
		h.ok(wait(j, "pay", time.Minute))
		if e := h.at(time.Minute - 1).ok(event("paid", "order-1", `1`)); e.Woke != 1 {
			t.Fatalf("an event before the deadline woke %d", e.Woke)
		}
		if s := h.step(j.ID, "pay"); s.Status != store.StepOK {
			t.Fatalf("step %+v, want ok", s)
		}
		// At the deadline, the event's entry times the wait out.
		h, j = durableJob(t)
		h.ok(wait(j, "pay", time.Minute))
		if e := h.at(time.Minute).ok(event("paid", "order-1", `1`)); e.Woke != 0 {
			t.Fatalf("an event at the deadline woke %d", e.Woke)
		}
		if s := h.step(j.ID, "pay"); s.Status != store.StepTimeout {
			t.Fatalf("step %+v, want timeout", s)
		}
		// With no event, the claim at the deadline records the timeout,
		// and a later event changes nothing.
		h, j = durableJob(t)
		h.ok(wait(j, "pay", time.Minute))
		j2 := h.at(time.Minute).claimOne("w1")
		if s := h.step(j.ID, "pay"); s.Status != store.StepTimeout || j2.Attempts != 1 {
			t.Fatalf("step %+v attempts %d, want timeout and attempt 1", s, j2.Attempts)
		}
		if e := h.ok(event("paid", "order-1", `1`)); e.Woke != 0 {
			t.Fatalf("an event after the timeout woke %d", e.Woke)
		}
		if r := h.reject(wait(j2, "pay", time.Minute), fsm.ErrStepRecorded); r.Step.Status != store.StepTimeout {
			t.Fatalf("replay: %+v", r.Step)
		}
	})

	t.Run("ASignalGoesToItsJobOnly", func(t *testing.T) {
		h, j := durableJob(t)
		h.submit(fsm.NewJob{ID: "other", Command: "b"})
		h.ok(waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: "approve", Signal: "approved"}))
		if e := h.ok(sendEvent(fsm.SendEvent{Name: "approved", Signal: true, JobID: "other", Payload: []byte(`1`)})); e.Woke != 0 {
			t.Fatalf("another job's signal woke %d", e.Woke)
		}
		if e := h.ok(event("approved", "", `1`)); e.Woke != 0 {
			t.Fatalf("an event of the signal's name woke %d", e.Woke)
		}
		if e := h.ok(sendEvent(fsm.SendEvent{Name: "approved", Signal: true, JobID: j.ID, Payload: []byte(`true`)})); e.Woke != 1 {
			t.Fatalf("the job's signal woke %d", e.Woke)
		}
		h.reject(sendEvent(fsm.SendEvent{Name: "approved", Signal: true, JobID: "nobody"}), fsm.ErrNotFound)
	})

	t.Run("CancelUnregistersTheWaitAndDeleteForgetsIt", func(t *testing.T) {
		h, j := durableJob(t)
		h.ok(wait(j, "pay", 0))
		h.ok(cancel(j.ID, false))
		if e := h.ok(event("paid", "order-1", `1`)); e.Woke != 0 {
			t.Fatalf("an event woke a cancelled job")
		}
		if s := h.step(j.ID, "pay"); s.Status != store.StepWaiting {
			t.Fatalf("a cancelled job's step became %s", s.Status)
		}
		if p, _ := h.f.Park(j.ID); p != nil {
			t.Fatalf("a cancelled job is parked: %+v", p)
		}
	})

	t.Run("WaitersPerKeyAreBounded", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Slots: fsm.MaxWaitersPerKey + 1}))
		jobs := make([]fsm.NewJob, fsm.MaxWaitersPerKey+1)
		for i := range jobs {
			jobs[i] = fsm.NewJob{Command: "a"}
		}
		h.submit(jobs...)
		var claimed []*store.Job
		for len(claimed) < len(jobs) {
			claimed = append(claimed, h.claim(fsm.Claim{WorkerID: "w1", Max: len(jobs)})...)
		}
		for _, j := range claimed[:fsm.MaxWaitersPerKey] {
			h.ok(wait(j, "pay", 0))
		}
		last := claimed[fsm.MaxWaitersPerKey]
		r := h.reject(wait(last, "pay", 0), fsm.ErrTooManyWaiters)
		var le *fsm.LimitError
		if !errors.As(r.Err, &le) || le.Limit != "max_waiters_per_key" {
			t.Fatalf("err %v, want the limit named", r.Err)
		}
		if e := h.ok(event("paid", "order-1", `1`)); e.Woke != fsm.MaxWaitersPerKey {
			t.Fatalf("woke %d", e.Woke)
		}
		h.ok(wait(last, "pay", 0)) // the event is kept: it matches now
	})
}

func TestInvokeStep(t *testing.T) {
	invoke := func(h *harness, j *store.Job) *store.Job {
		h.t.Helper()
		r := h.ok(invokeStep(fsm.InvokeStep{JobID: j.ID, Lease: j.Lease, Key: "child", Child: fsm.NewJob{Command: "c", Queue: "kids", MaxAttempts: 1}}))
		if !r.Parked || r.Step.Status != store.StepWaiting || r.Step.ChildID == "" {
			h.t.Fatalf("invoke: parked %v %+v", r.Parked, r.Step)
		}
		// A resend finds the same child.
		again := h.ok(invokeStep(fsm.InvokeStep{JobID: j.ID, Lease: j.Lease, Key: "child", Child: fsm.NewJob{Command: "c"}}))
		if again.Step.ChildID != r.Step.ChildID {
			h.t.Fatalf("a resend made child %s, first %s", again.Step.ChildID, r.Step.ChildID)
		}
		return h.job(r.Step.ChildID)
	}
	for _, c := range []struct {
		name   string
		end    func(h *harness, child *store.Job)
		status string
		result string
	}{
		{"AChildDoneGivesItsResult", func(h *harness, c *store.Job) {
			h.ok(report(fsm.Report{JobID: c.ID, Lease: c.Lease, Success: true, Result: json.RawMessage(`{"n":1}`)}))
		}, store.StepOK, `{"n":1}`},
		{"AChildFailedGivesItsError", func(h *harness, c *store.Job) {
			h.ok(fail(c.ID, c.Lease, "boom"))
		}, store.StepFailed, `{"status":"failed","error":"boom"}`},
		{"AChildCancelledGivesItsStatus", func(h *harness, c *store.Job) {
			h.ok(cancel(c.ID, false))
			h.ok(fail(c.ID, c.Lease, "stopped"))
		}, store.StepFailed, `{"status":"cancelled","error":"stopped"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, j := durableJob(t)
			child := invoke(h, j)
			if got := h.job(j.ID); got.Status != store.StatusPending || got.Attempts != 0 {
				t.Fatalf("parent %s attempts %d", got.Status, got.Attempts)
			}
			cl := h.claim(fsm.Claim{WorkerID: "w1", Queues: []string{"kids"}})
			if len(cl) != 1 || cl[0].ID != child.ID {
				t.Fatalf("claimed %v, want the child", jobIDs(cl))
			}
			c.end(h, cl[0])
			s := h.step(j.ID, "child")
			if s.Status != c.status || string(s.Result) != c.result {
				t.Fatalf("step %s %s, want %s %s", s.Status, s.Result, c.status, c.result)
			}
			j2 := h.claimOne("w1")
			if j2.ID != j.ID || j2.Attempts != 1 {
				t.Fatalf("claimed %s attempt %d, want the parent's first", j2.ID, j2.Attempts)
			}
			h.reject(invokeStep(fsm.InvokeStep{JobID: j.ID, Lease: j2.Lease, Key: "child", Child: fsm.NewJob{Command: "c"}}), fsm.ErrStepRecorded)
		})
	}

	t.Run("AChildCannotBeItsParent", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{ID: "p", Command: "a", IdempotencyKey: "k", UniqueFor: int64(time.Hour)})
		j := h.claimOne("w1")
		h.reject(invokeStep(fsm.InvokeStep{JobID: j.ID, Lease: j.Lease, Key: "kid", Child: fsm.NewJob{Command: "c", IdempotencyKey: "k"}}), nil)
	})

	t.Run("CancellingTheParentLeavesTheChild", func(t *testing.T) {
		h, j := durableJob(t)
		child := invoke(h, j)
		h.ok(cancel(j.ID, false))
		h.status(store.StatusPending, child.ID)
		c := h.claim(fsm.Claim{WorkerID: "w1", Queues: []string{"kids"}})[0]
		h.ok(succeed(c.ID, c.Lease))
		h.status(store.StatusCancelled, j.ID)
	})
}

// TestDurableSnapshot checks that a snapshot carries the events, waits
// and parks, and that two FSMs fed one log agree.
func TestDurableSnapshot(t *testing.T) {
	h, j := durableJob(t)
	h.ok(event("paid", "order-2", `1`))
	h.ok(waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: "pay", Event: "paid", EventKey: "order-1"}))
	f2 := snapshotRestore(t, h.f)
	if digest(t, f2) != digest(t, h.f) {
		t.Fatal("the restored FSM's digest differs")
	}
	h.f = f2
	if e := h.ok(event("paid", "order-1", `2`)); e.Woke != 1 || e.Seq != 2 {
		t.Fatalf("after restore the event woke %d seq %d", e.Woke, e.Seq)
	}
}

// TestEventWaitRace sends an event just before, with (in one entry,
// either order), and just after its wait is registered, many rounds: no
// wait misses its event (100,000 rounds; fewer with -short or -race).
// Rounds go in groups, each group's entries in one
// batch (one store transaction), so that 100,000 rounds stay quick.
func TestEventWaitRace(t *testing.T) {
	rounds, group := 100_000/raceScale, 1_000 // 10,000 under the race detector
	if testing.Short() {
		rounds = 2_000
	}
	h := setup(t)
	h.ok(register(store.Worker{ID: "w1", Slots: 1 << 30}))
	missed := 0
	for g := 0; g < rounds; g += group {
		jobs := make([]fsm.NewJob, group)
		for i := range jobs {
			jobs[i] = fsm.NewJob{ID: fmt.Sprintf("r%d", g+i), Command: "a", Queue: "race"}
		}
		h.submit(jobs...)
		var claimed []*store.Job
		for len(claimed) < group {
			claimed = append(claimed, h.claim(fsm.Claim{WorkerID: "w1", Queues: []string{"race"}, Max: group})...)
		}
		var entries [][]fsm.Cmd
		for _, j := range claimed {
			w := waitStep(fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: "w", Event: "e", EventKey: j.ID, Timeout: int64(time.Hour)})
			ev := event("e", j.ID, `1`)
			switch j.Seq % 4 {
			case 0: // just before
				entries = append(entries, []fsm.Cmd{ev}, []fsm.Cmd{w})
			case 1: // in one entry, the event first
				entries = append(entries, []fsm.Cmd{ev, w})
			case 2: // in one entry, the wait first
				entries = append(entries, []fsm.Cmd{w, ev})
			case 3: // just after
				entries = append(entries, []fsm.Cmd{w}, []fsm.Cmd{ev})
			}
		}
		for _, res := range h.batch(entries) {
			for _, r := range res {
				if r.Err != nil {
					t.Fatalf("group %d: %v", g, r.Err)
				}
			}
		}
		var done []fsm.Cmd
		for _, j := range claimed {
			s, err := h.f.Step(j.ID, "w")
			p, _ := h.f.Park(j.ID)
			jj := h.job(j.ID)
			if err != nil || s.Status != store.StepOK || p != nil || (jj.Status == store.StatusPending && jj.RunAt > ns(h.now)) {
				missed++
			}
			done = append(done, cancel(j.ID, false))
		}
		h.do(done...)
	}
	if missed != 0 {
		t.Fatalf("%d of %d waits missed their event", missed, rounds)
	}
}
