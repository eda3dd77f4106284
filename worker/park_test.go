//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

// onlyFinalReport fails the test unless job id got exactly one report, a
// done, from its last attempt: a parked attempt sends none.
func onlyFinalReport(t *testing.T, f *fakeServer, id string) {
	t.Helper()
	f.waitStatus(t, id, wire.StatusDone)
	reps := f.reportsOf(id)
	if len(reps) != 1 || reps[0].Kind != "done" || reps[0].Req.Lease != f.job(id).Lease {
		t.Fatalf("reports %+v, want one done from the last attempt (lease %d)", reps, f.job(id).Lease)
	}
}

// TestSleepParksWithoutAReport: a handler charges (a step), sleeps, then
// sends a receipt. Its first attempt parks on the sleep: Sleep returns an
// error wrapping ErrParked, and the worker sends no report for it; the
// second replays the charge without running it, passes the sleep and
// ends done. A handler that swallows ErrParked and returns nil sends no
// report for its parked attempt either.
func TestSleepParksWithoutAReport(t *testing.T) {
	f := newFakeServer(t)
	runs := &stepCounter{runs: map[string]int{}}
	parkedErr := make(chan error, 4)
	startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
		w.Handle("order", func(ctx context.Context, job *worker.Job) error {
			if _, err := job.Step(ctx, "charge", runs.step("charge", "ch_1")); err != nil {
				return err
			}
			if err := job.Sleep(ctx, "cool-off", time.Second); err != nil {
				parkedErr <- err
				return err
			}
			_, err := job.Step(ctx, "receipt", runs.step("receipt", nil))
			return err
		})
		w.Handle("sloppy", func(ctx context.Context, job *worker.Job) error {
			_ = job.SleepUntil(ctx, "nap", time.Now().Add(time.Hour)) // ignored
			return nil
		})
	})
	id := f.add(wire.Job{Type: "order"})
	onlyFinalReport(t, f, id)
	if err := <-parkedErr; !errors.Is(err, worker.ErrParked) {
		t.Fatalf("Sleep returned %v, want an error wrapping ErrParked", err)
	}
	if f.job(id).Attempts != 2 || runs.count("charge") != 1 || runs.count("receipt") != 1 {
		t.Fatalf("attempts %d, charge ran %d, receipt ran %d; want 2, 1, 1", f.job(id).Attempts, runs.count("charge"), runs.count("receipt"))
	}
	if st := f.step(id, "cool-off"); st == nil || st.Kind != wire.StepSleep || st.Status != wire.StepOK {
		t.Fatalf("sleep step %+v", st)
	}

	sloppy := f.add(wire.Job{Type: "sloppy"})
	f.waitStatus(t, sloppy, wire.StatusDone)
	if reps := f.reportsOf(sloppy); len(reps) != 1 || reps[0].Req.Lease != f.job(sloppy).Lease {
		t.Fatalf("reports of a handler that swallowed ErrParked: %+v, want only its second attempt's", reps)
	}
}

// TestWaitForEvent: a handler waits for an event with a timeout; the
// first attempt parks, the test sends the event, and the second gets its
// payload. A wait whose timeout passes first gets ok false.
func TestWaitForEvent(t *testing.T) {
	f := newFakeServer(t)
	type got struct {
		payload string
		ok      bool
	}
	seen := make(chan got, 2)
	startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
		w.Handle("webhook", func(ctx context.Context, job *worker.Job) error {
			var timeout time.Duration
			_ = json.Unmarshal(job.Payload, &timeout)
			p, ok, err := job.WaitForEvent(ctx, "settled", "payment.settled", "order-42", timeout)
			if err != nil {
				return err
			}
			seen <- got{string(p), ok}
			return nil
		})
	})
	id := f.add(wire.Job{Type: "webhook", Payload: json.RawMessage(`3600000000000`)})
	waitFor(t, 10*time.Second, "the job parked on its wait", func() bool { return f.parkedOn(id) == "settled" })
	st := f.step(id, "settled")
	if st.Event != "payment.settled" || st.EventKey != "order-42" {
		t.Fatalf("wait step %+v", st)
	}
	cl := stepClient(t, f.URL)
	if rep, err := cl.SendEvent(t.Context(), wire.EventRequest{Name: "payment.settled", Key: "order-42", Payload: json.RawMessage(`{"amount":42}`)}); err != nil || rep.Woke != 1 {
		t.Fatalf("SendEvent = %+v, %v", rep, err)
	}
	if g := <-seen; g.payload != `{"amount":42}` || !g.ok {
		t.Fatalf("the handler got %+v, want the event's payload", g)
	}
	onlyFinalReport(t, f, id)

	late := f.add(wire.Job{Type: "webhook", Payload: json.RawMessage(`5000000`)}) // 5 ms: the fake times it out at once
	if g := <-seen; g.payload != "" || g.ok {
		t.Fatalf("a timed-out wait gave %+v, want ok false", g)
	}
	onlyFinalReport(t, f, late)
}

// TestInvokeChild: a parent invokes a child job and parks; the child
// (run by the same worker) ends done with a result, which the parent's
// next attempt gets. A child that fails gives the parent a
// ChildFailedError, which fails it for good.
func TestInvokeChild(t *testing.T) {
	f := newFakeServer(t)
	startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
		w.Handle("parent", func(ctx context.Context, job *worker.Job) error {
			res, err := job.Invoke(ctx, "child", wire.SubmitRequest{Type: "child", Payload: job.Payload})
			if err != nil {
				return err
			}
			job.SetResult(json.RawMessage(`{"child":` + string(res) + `}`))
			return nil
		})
		w.Handle("child", func(ctx context.Context, job *worker.Job) error {
			if string(job.Payload) == `"fail"` {
				return worker.NoRetry(errors.New("out of stock"))
			}
			job.SetResult(json.RawMessage(`"receipt-1"`))
			return nil
		})
	})
	id := f.add(wire.Job{Type: "parent", Payload: json.RawMessage(`"ok"`)})
	onlyFinalReport(t, f, id)
	if res := f.reportsOf(id)[0].Req.Result; string(res) != `{"child":"receipt-1"}` {
		t.Fatalf("parent's result %s", res)
	}
	st := f.step(id, "child")
	if st.Kind != wire.StepInvoke || st.ChildID == "" || f.job(st.ChildID).Status != wire.StatusDone {
		t.Fatalf("invoke step %+v", st)
	}

	bad := f.add(wire.Job{Type: "parent", Payload: json.RawMessage(`"fail"`)})
	f.waitStatus(t, bad, wire.StatusFailed)
	reps := f.reportsOf(bad)
	if len(reps) != 1 || reps[0].Req.Retry == nil || *reps[0].Req.Retry || reps[0].Req.Error == "" {
		t.Fatalf("parent of a failed child reported %+v, want one final failure", reps)
	}
}

// TestStepWithRetries: a step tried on its own inside the attempt, with
// its tries recorded; a last failure recorded failed (the job fails for
// good) or, with RetryJob, nothing recorded and the attempt failed to be
// retried.
func TestStepWithRetries(t *testing.T) {
	f := newFakeServer(t)
	tries := map[string]int{}
	startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
		w.Handle("flaky", func(ctx context.Context, job *worker.Job) error {
			var mode string
			_ = json.Unmarshal(job.Payload, &mode)
			opt := worker.StepOptions{Attempts: 3, Backoff: time.Millisecond, RetryJob: mode == "retry-job"}
			_, err := job.StepWith(ctx, "call", opt, func(context.Context) (any, error) {
				tries[mode]++
				if mode == "third-time" && tries[mode] == 3 {
					return "ok", nil
				}
				return nil, errors.New("partner API down")
			})
			return err
		})
	})
	ok := f.add(wire.Job{Type: "flaky", Payload: json.RawMessage(`"third-time"`)})
	f.waitStatus(t, ok, wire.StatusDone)
	if st := f.step(ok, "call"); st == nil || st.Attempts != 3 || st.Status != wire.StepOK || string(st.Result) != `"ok"` {
		t.Fatalf("step after 3 tries: %+v", st)
	}

	failed := f.add(wire.Job{Type: "flaky", Payload: json.RawMessage(`"fail"`)})
	rep := f.waitReport(t, failed)
	if st := f.step(failed, "call"); st == nil || st.Status != wire.StepFailed || st.Attempts != 3 {
		t.Fatalf("step failed 3 times: %+v", st)
	}
	if rep.Req.Retry == nil || *rep.Req.Retry || rep.Req.Error != "step call failed: partner API down" {
		t.Fatalf("report %+v, want a final failure naming the step", rep.Req)
	}

	again := f.add(wire.Job{Type: "flaky", Payload: json.RawMessage(`"retry-job"`)})
	rep = f.waitReport(t, again)
	if st := f.step(again, "call"); st != nil {
		t.Fatalf("RetryJob recorded %+v, want nothing", st)
	}
	if rep.Req.Retry != nil || rep.Req.Error != "partner API down" {
		t.Fatalf("report %+v, want a failure the server may retry", rep.Req)
	}
	if tries["retry-job"] != 3 || tries["fail"] != 3 {
		t.Fatalf("tries %v, want 3 each", tries)
	}
}

// TestParkingCallsOutsideAWorker: a Job a test builds has no journal:
// Sleep returns at once, WaitForEvent and Invoke say so.
func TestParkingCallsOutsideAWorker(t *testing.T) {
	job := &worker.Job{ID: "j"}
	if err := job.Sleep(t.Context(), "nap", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := job.WaitForEvent(t.Context(), "w", "e", "k", 0); !errors.Is(err, worker.ErrNotDurable) {
		t.Fatalf("WaitForEvent = %v, want ErrNotDurable", err)
	}
	if _, err := job.Invoke(t.Context(), "c", wire.SubmitRequest{Type: "x"}); !errors.Is(err, worker.ErrNotDurable) {
		t.Fatalf("Invoke = %v, want ErrNotDurable", err)
	}
	if _, err := job.StepWith(t.Context(), "s", worker.StepOptions{Attempts: -1}, nil); !errors.Is(err, worker.ErrStepOptions) {
		t.Fatalf("StepWith(Attempts -1) = %v, want ErrStepOptions", err)
	}
}
