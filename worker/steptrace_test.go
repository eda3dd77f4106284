//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
)

// TestStepSpans: each Job.Step is a span "step NAME", a child of its
// attempt's run span, whose attributes say its key, kind, recorded status
// and attempts, and whether its result was replayed from the journal. The
// first attempt records A and fails in B (a plain error: B is not
// recorded); the second replays A, records B, and C fails for good.
func TestStepSpans(t *testing.T) {
	c := clustertest.New(t, 1)
	cl := stepClient(t, c.URL(0))
	rec := tracetest.NewSpanRecorder()
	cfg := testConfig(t, c.URL(0))
	cfg.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	startWorker(t, cfg, func(w *worker.Worker) {
		w.Handle("steps", func(ctx context.Context, job *worker.Job) error {
			if _, err := job.Step(ctx, "A", func(ctx context.Context) (any, error) {
				_, inner := cfg.Tracer.Tracer("handler").Start(ctx, "inside A")
				inner.End()
				return "a", nil
			}); err != nil {
				return err
			}
			if _, err := job.Step(ctx, "B", func(context.Context) (any, error) {
				if job.Attempt == 1 {
					return nil, errors.New("B is not ready")
				}
				return "b", nil
			}); err != nil {
				return err
			}
			_, err := job.Step(ctx, "C", func(context.Context) (any, error) {
				return nil, worker.NoRetry(errors.New("card declined"))
			})
			return err
		})
	})
	two := 2
	j, err := cl.Submit(t.Context(), wire.SubmitRequest{Type: "steps", MaxAttempts: &two, Backoff: &wire.Backoff{Base: "1ms"}})
	if err != nil {
		t.Fatal(err)
	}
	if done := waitDone(t, cl, j.ID); done.Status != wire.StatusFailed || done.Attempts != 2 {
		t.Fatalf("job %s after %d attempts (%s), want failed after 2", done.Status, done.Attempts, done.LastError)
	}
	runs := func() []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "run" {
				out = append(out, s)
			}
		}
		return out
	}
	waitFor(t, 5*time.Second, "both run spans", func() bool { return len(runs()) == 2 })

	var got []string
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if !strings.HasPrefix(s.Name(), "step ") {
			continue
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		run := slices.IndexFunc(runs(), func(r sdktrace.ReadOnlySpan) bool { return r.SpanContext().SpanID() == s.Parent().SpanID() })
		if run < 0 || s.SpanContext().TraceID() != s.Parent().TraceID() {
			t.Errorf("span %s is not a child of a run span", s.Name())
		}
		line := fmt.Sprintf("%d:%s key=%s kind=%s status=%s attempts=%s replayed=%s code=%s", run+1, s.Name(),
			attrs["workron.step.key"], attrs["workron.step.kind"], attrs["workron.step.status"], attrs["workron.step.attempts"],
			attrs["workron.step.replayed"], s.Status().Code)
		got = append(got, line)
		byName[fmt.Sprintf("%d:%s", run+1, s.Name())] = s
	}
	want := []string{
		"1:step A key=A kind=run status=ok attempts=1 replayed=false code=Unset",
		"1:step B key=B kind=run status= attempts= replayed=false code=Error",
		"2:step A key=A kind=run status=ok attempts=1 replayed=true code=Unset",
		"2:step B key=B kind=run status=ok attempts=1 replayed=false code=Unset",
		"2:step C key=C kind=run status=failed attempts=1 replayed=false code=Error",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("step spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := byName["2:step C"]; s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, "card declined") {
		t.Errorf("step C's status %+v, want the step's error", s.Status())
	}
	// The step's function runs inside its span: its own spans are children.
	for _, s := range rec.Ended() {
		if s.Name() == "inside A" && s.Parent().SpanID() != byName["1:step A"].SpanContext().SpanID() {
			t.Errorf("the handler's span inside step A is not the step span's child")
		}
	}
}
