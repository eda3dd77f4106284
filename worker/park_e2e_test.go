//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/worker"
)

// TestDurableJobOnACluster runs a handler of a step, a sleep of a second,
// a wait for an event the test sends once the job waits, and an invoke of
// a child job, on a real 3-node cluster. The job parks three times,
// uncharged, and ends done; each step's function ran once, the child once, and the
// journal holds each step ok, the wait with the event's payload and the
// invoke with the child's result.
func TestDurableJobOnACluster(t *testing.T) {
	c := clustertest.New(t, 3)
	cl := stepClient(t, c.URLs()...)
	runs := &stepCounter{runs: map[string]int{}}
	startWorker(t, testConfig(t, c.URLs()...), func(w *worker.Worker) {
		w.Handle("order", func(ctx context.Context, job *worker.Job) error {
			charge, err := job.Step(ctx, "charge", runs.step("charge", "ch_1"))
			if err != nil {
				return err
			}
			if err := job.Sleep(ctx, "cool-off", time.Second); err != nil {
				return err
			}
			paid, ok, err := job.WaitForEvent(ctx, "settled", "payment.settled", "order-"+job.ID, time.Hour)
			if err != nil {
				return err
			}
			if !ok {
				return worker.NoRetry(fmt.Errorf("the wait timed out"))
			}
			receipt, err := job.Invoke(ctx, "receipt", wire.SubmitRequest{Type: "receipt", Payload: charge})
			if err != nil {
				return err
			}
			job.SetResult(json.RawMessage(fmt.Sprintf(`{"paid":%s,"receipt":%s}`, paid, receipt)))
			return nil
		})
		w.Handle("receipt", func(ctx context.Context, job *worker.Job) error {
			runs.step("receipt-child", nil)(ctx)
			job.SetResult(json.RawMessage(`"receipt for ` + strings.Trim(string(job.Payload), `"`) + `"`))
			return nil
		})
	})
	j, err := cl.Submit(t.Context(), wire.SubmitRequest{Type: "order"})
	if err != nil {
		t.Fatal(err)
	}
	// The job parks on its sleep, then on its wait: send the event then.
	if err := poll.True(t.Context(), 30*time.Second, 20*time.Millisecond, func() bool {
		got, err := cl.Get(t.Context(), j.ID)
		return err == nil && got.Parked != nil && got.Parked.Kind == wire.StepWait
	}); err != nil {
		t.Fatal("the job never parked on its wait")
	}
	if rep, err := cl.SendEvent(t.Context(), wire.EventRequest{Name: "payment.settled", Key: "order-" + j.ID, Payload: json.RawMessage(`{"amount":42}`)}); err != nil || rep.Woke != 1 {
		t.Fatalf("SendEvent = %+v, %v; want it to wake the job", rep, err)
	}
	done := waitDone(t, cl, j.ID)
	if done.Status != wire.StatusDone || done.Attempts != 1 {
		t.Fatalf("job %s after %d attempts: %s; want done, its parks uncharged", done.Status, done.Attempts, done.LastError)
	}
	var outcomes []string
	for _, a := range done.AttemptHistory {
		outcomes = append(outcomes, a.Status)
	}
	if got := strings.Join(outcomes, " "); got != "parked parked parked done" {
		t.Errorf("attempt history %s, want three parks then done", got)
	}
	for name, want := range map[string]int{"charge": 1, "receipt-child": 1} {
		if got := runs.count(name); got != want {
			t.Errorf("%s ran %d times, want %d", name, got, want)
		}
	}
	if string(done.Result) != `{"paid":{"amount":42},"receipt":"receipt for ch_1"}` {
		t.Errorf("result %s", done.Result)
	}
	list, err := cl.Steps(t.Context(), j.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list.Steps {
		got = append(got, s.Key+":"+s.Kind+":"+s.Status)
	}
	if want := "charge::ok cool-off:sleep:ok receipt:invoke:ok settled:wait:ok"; strings.Join(got, " ") != want {
		t.Errorf("journal %v, want %s", got, want)
	}
}
