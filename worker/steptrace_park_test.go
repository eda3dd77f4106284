//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package worker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
)

// TestParkingStepSpans: a sleep and a wait are spans "step NAME" of their
// kind too. The attempt that parks on one says so (parked, the step's
// status: ok for a sleep, waiting for a wait); a later attempt replays it
// from the journal (replayed, the wait's status ok once its event came).
func TestParkingStepSpans(t *testing.T) {
	c := clustertest.New(t, 1)
	cl := stepClient(t, c.URL(0))
	rec := tracetest.NewSpanRecorder()
	cfg := testConfig(t, c.URL(0))
	cfg.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	startWorker(t, cfg, func(w *worker.Worker) {
		w.Handle("order", func(ctx context.Context, job *worker.Job) error {
			if _, err := job.Step(ctx, "charge", func(context.Context) (any, error) { return "ch_1", nil }); err != nil {
				return err
			}
			if err := job.Sleep(ctx, "cool-off", 20*time.Millisecond); err != nil {
				return err
			}
			_, _, err := job.WaitForEvent(ctx, "paid", "payment", job.ID, time.Hour)
			return err
		})
	})
	j, err := cl.Submit(t.Context(), wire.SubmitRequest{Type: "order"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job parked on its wait", func() bool {
		got, err := cl.Get(t.Context(), j.ID)
		return err == nil && got.Parked != nil && got.Parked.Kind == wire.StepWait
	})
	if _, err := cl.SendEvent(t.Context(), wire.EventRequest{Name: "payment", Key: j.ID}); err != nil {
		t.Fatal(err)
	}
	if done := waitDone(t, cl, j.ID); done.Status != wire.StatusDone {
		t.Fatalf("job %s (%s), want done", done.Status, done.LastError)
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
	waitFor(t, 5*time.Second, "three run spans", func() bool { return len(runs()) == 3 })

	var got []string
	for _, s := range rec.Ended() {
		if !strings.HasPrefix(s.Name(), "step ") {
			continue
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		run := slices.IndexFunc(runs(), func(r sdktrace.ReadOnlySpan) bool { return r.SpanContext().SpanID() == s.Parent().SpanID() })
		got = append(got, fmt.Sprintf("%d:%s kind=%s status=%s replayed=%s parked=%s code=%s", run+1, s.Name(),
			attrs["workron.step.kind"], attrs["workron.step.status"], attrs["workron.step.replayed"], attrs["workron.step.parked"], s.Status().Code))
	}
	want := []string{
		"1:step charge kind=run status=ok replayed=false parked= code=Unset",
		"1:step cool-off kind=sleep status=ok replayed=false parked=true code=Unset",
		"2:step charge kind=run status=ok replayed=true parked= code=Unset",
		"2:step cool-off kind=sleep status=ok replayed=true parked= code=Unset",
		"2:step paid kind=wait status=waiting replayed=false parked=true code=Unset",
		"3:step charge kind=run status=ok replayed=true parked= code=Unset",
		"3:step cool-off kind=sleep status=ok replayed=true parked= code=Unset",
		"3:step paid kind=wait status=ok replayed=true parked= code=Unset",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("step spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
