package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/syncbuf"
	"github.com/workron/workron/worker"
)

// TestJobTelemetry: what a job's attempt logs and traces, which the
// worker spares itself (per job) when it logs or traces nothing.
func TestJobTelemetry(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	seen := make(chan string, 1) // the traceparent the handler got
	handle := func(w *worker.Worker) {
		w.Handle("echo", func(ctx context.Context, job *worker.Job) error {
			seen <- job.TraceParent
			return nil
		})
	}

	t.Run("LogLinesNameTheJob", func(t *testing.T) {
		f := newFakeServer(t)
		var logs syncbuf.Buffer
		cfg := testConfig(t, f.URL)
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		startWorker(t, cfg, handle)
		id := f.add(wire.Job{Type: "echo"})
		<-seen
		f.waitReport(t, id)
		for _, msg := range []string{`msg="job started"`, `msg="job done"`, `msg=reported`} {
			waitFor(t, 5*time.Second, msg, func() bool {
				for line := range strings.Lines(logs.String()) {
					if strings.Contains(line, msg) && strings.Contains(line, "job_id="+id) && strings.Contains(line, "attempt=1") {
						return true
					}
				}
				return false
			})
		}
	})
	t.Run("RunSpanCarriesTheJob", func(t *testing.T) {
		f := newFakeServer(t)
		rec := tracetest.NewSpanRecorder()
		cfg := testConfig(t, f.URL)
		cfg.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		startWorker(t, cfg, handle)
		id := f.add(wire.Job{Type: "echo", Queue: "q1", TraceParent: tp})
		got := <-seen
		f.waitReport(t, id)
		spans := rec.Ended()
		if len(spans) != 1 || spans[0].Name() != "run" || spans[0].SpanKind() != trace.SpanKindConsumer ||
			spans[0].Parent().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
			t.Fatalf("spans %v, want one consumer span run in the job's trace", spans)
		}
		attrs := map[string]string{}
		for _, a := range spans[0].Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		if attrs["workron.job.id"] != id || attrs["workron.job.queue"] != "q1" || attrs["workron.job.type"] != "echo" ||
			attrs["workron.job.attempt"] != "1" || attrs["workron.worker.id"] != cfg.ID {
			t.Fatalf("run span attributes %v", attrs)
		}
		if want := "00-0af7651916cd43dd8448eb211c80319c-" + spans[0].SpanContext().SpanID().String() + "-01"; got != want {
			t.Fatalf("handler's traceparent %q, want the run span's %q", got, want)
		}
	})
	t.Run("WithoutTracerTheJobsTraceIsHandedOn", func(t *testing.T) {
		f := newFakeServer(t)
		cfg := testConfig(t, f.URL)
		cfg.Logger = nil // the SDK's default: nothing logged
		startWorker(t, cfg, handle)
		id := f.add(wire.Job{Type: "echo", TraceParent: tp})
		if got := <-seen; got != tp {
			t.Fatalf("handler's traceparent %q, want the job's %q", got, tp)
		}
		if rep := f.waitReport(t, id); rep.Kind != "done" || rep.Req.TraceParent != tp {
			t.Fatalf("report %+v, want done naming the job's trace", rep)
		}
	})
}
