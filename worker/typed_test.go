package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

func TestTypedJobs(t *testing.T) {
	f := newFakeServer(t)
	seen := make(chan *worker.Job, 1)
	startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
		w.Handle("echo", func(ctx context.Context, job *worker.Job) error {
			seen <- job
			return nil
		})
		w.Handle("fail", func(ctx context.Context, job *worker.Job) error {
			return errors.New("boom")
		})
		w.Handle("final", func(ctx context.Context, job *worker.Job) error {
			return worker.NoRetry(errors.New("bad payload"))
		})
		w.Handle("panic", func(ctx context.Context, job *worker.Job) error {
			panic("kaboom")
		})
		w.Handle("slow", func(ctx context.Context, job *worker.Job) error {
			<-ctx.Done()
			return ctx.Err()
		})
	})

	t.Run("SuccessReportsDone", func(t *testing.T) {
		id := f.add(wire.Job{Type: "echo", Payload: json.RawMessage(`{"n":1}`), Metadata: map[string]string{"k": "v"}})
		rep := f.waitReport(t, id)
		if rep.Kind != "done" || rep.Req.Error != "" {
			t.Fatalf("report = %+v, want done", rep)
		}
		job := <-seen
		if job.ID != id || job.Type != "echo" || string(job.Payload) != `{"n":1}` || job.Attempt != 1 || job.Metadata["k"] != "v" {
			t.Fatalf("handler saw %+v", job)
		}
	})
	t.Run("ErrorReportsFailWithItsText", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "fail"}))
		if rep.Kind != "fail" || rep.Req.Error != "boom" || rep.Req.Retry != nil {
			t.Fatalf("report = %+v, want fail boom", rep)
		}
	})
	t.Run("NoRetryErrorIsFinal", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "final"}))
		if rep.Kind != "fail" || rep.Req.Error != "bad payload" || rep.Req.Retry == nil || *rep.Req.Retry {
			t.Fatalf("report = %+v, want a final failure", rep)
		}
	})
	t.Run("PanicIsReportedAndTheWorkerGoesOn", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "panic"}))
		if rep.Kind != "fail" || rep.Req.Error != "panic: kaboom" {
			t.Fatalf("report = %+v, want fail panic: kaboom", rep)
		}
		rep = f.waitReport(t, f.add(wire.Job{Type: "echo"}))
		<-seen
		if rep.Kind != "done" {
			t.Fatalf("after a panic: report = %+v, want done", rep)
		}
	})
	t.Run("UnknownTypeFailsForGood", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "nobody"}))
		if rep.Kind != "fail" || !strings.Contains(rep.Req.Error, `no handler for job type "nobody"`) ||
			rep.Req.Retry == nil || *rep.Req.Retry {
			t.Fatalf("report = %+v, want a final failure naming the type", rep)
		}
	})
	t.Run("TimeoutEndsTheHandlerContext", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "slow", Timeout: "100ms"}))
		if rep.Kind != "fail" || rep.Req.Error != "timed out after 100ms" {
			t.Fatalf("report = %+v, want timed out after 100ms", rep)
		}
	})
	t.Run("CancelEndsTheHandlerContext", func(t *testing.T) {
		id := f.add(wire.Job{Type: "slow"})
		f.waitStatus(t, id, wire.StatusRunning)
		f.cancel(id)
		rep := f.waitReport(t, id)
		if rep.Kind != "fail" || rep.Req.Error != "cancelled" || rep.Req.Retry == nil || *rep.Req.Retry {
			t.Fatalf("report = %+v, want cancelled without retry", rep)
		}
	})
}
