//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
	"github.com/workron/workron/worker/client"
)

// stepCounter counts the runs of each step.
type stepCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *stepCounter) step(name string, result any) worker.StepFunc {
	return func(context.Context) (any, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.runs[name]++
		return result, nil
	}
}

func (c *stepCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[name]
}

func stepClient(t *testing.T, urls ...string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Servers = urls
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func waitDone(t *testing.T, cl *client.Client, id string) *wire.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	j, err := cl.Wait(ctx, id, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestStepsReplayAfterACrash: a handler runs steps A, B, C and a loop of
// two "send" steps; its first attempt fails after B. The second attempt
// gets A's and B's recorded results without running them, and runs C and
// the sends once: every step ran exactly once.
func TestStepsReplayAfterACrash(t *testing.T) {
	c := clustertest.New(t, 1)
	cl := stepClient(t, c.URL(0))
	runs := &stepCounter{runs: map[string]int{}}
	var seen sync.Map // attempt -> what A and B returned
	startWorker(t, testConfig(t, c.URL(0)), func(w *worker.Worker) {
		w.Handle("steps", func(ctx context.Context, job *worker.Job) error {
			a, err := worker.StepAs(ctx, job, "A", func(ctx context.Context) (string, error) {
				runs.step("A", nil)(ctx)
				return fmt.Sprintf("a-from-attempt-%d", job.Attempt), nil
			})
			if err != nil {
				return err
			}
			b, err := job.Step(ctx, "B", runs.step("B", map[string]int{"n": job.Attempt}))
			if err != nil {
				return err
			}
			seen.Store(job.Attempt, a+" "+string(b))
			if job.Attempt == 1 {
				return errors.New("crash after B")
			}
			if _, err := job.Step(ctx, "C", runs.step("C", "c")); err != nil {
				return err
			}
			for range 2 {
				if _, err := job.Step(ctx, "send", runs.step("send", nil)); err != nil {
					return err
				}
			}
			return nil
		})
	})
	three := 3
	j, err := cl.Submit(t.Context(), wire.SubmitRequest{Type: "steps", MaxAttempts: &three, Backoff: &wire.Backoff{Base: "1ms"}})
	if err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, cl, j.ID)
	if done.Status != wire.StatusDone || done.Attempts != 2 {
		t.Fatalf("job %s after %d attempts (%s), want done after 2", done.Status, done.Attempts, done.LastError)
	}
	for name, want := range map[string]int{"A": 1, "B": 1, "C": 1, "send": 2} {
		if got := runs.count(name); got != want {
			t.Errorf("step %s ran %d times, want %d", name, got, want)
		}
	}
	if v, _ := seen.Load(2); v != `a-from-attempt-1 {"n":1}` {
		t.Errorf("the second attempt saw %q, want the first attempt's results", v)
	}
	list, err := cl.Steps(t.Context(), j.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range list.Steps {
		keys = append(keys, fmt.Sprintf("%s@%d", s.Key, s.JobAttempt))
	}
	if fmt.Sprint(keys) != "[A@1 B@1 C@2 send@2 send#2@2]" {
		t.Errorf("journal %v", keys)
	}
}

// TestStepFailedForGoodIsReplayed: a step whose function fails with
// NoRetry is recorded as failed; the job fails for good with its error,
// and a record of the step by hand afterwards is refused (the attempt
// ended), the failure stays.
func TestStepFailedForGoodIsReplayed(t *testing.T) {
	c := clustertest.New(t, 1)
	cl := stepClient(t, c.URL(0))
	startWorker(t, testConfig(t, c.URL(0)), func(w *worker.Worker) {
		w.Handle("bad", func(ctx context.Context, job *worker.Job) error {
			_, err := job.Step(ctx, "validate", func(context.Context) (any, error) {
				return nil, worker.NoRetry(errors.New("card declined"))
			})
			var sf *worker.StepFailedError
			if !errors.As(err, &sf) || sf.Message != "card declined" {
				return worker.NoRetry(fmt.Errorf("step returned %v, want a StepFailedError", err))
			}
			return err
		})
	})
	j, err := cl.Submit(t.Context(), wire.SubmitRequest{Type: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, cl, j.ID)
	if done.Status != wire.StatusFailed || done.Attempts != 1 || done.LastError != "step validate failed: card declined" {
		t.Fatalf("job %s after %d attempts: %q", done.Status, done.Attempts, done.LastError)
	}
	st, err := cl.Step(t.Context(), j.ID, "validate")
	if err != nil || st.Status != wire.StepFailed || string(st.Result) != `"card declined"` {
		t.Fatalf("recorded %+v, %v", st, err)
	}
	if _, _, err := cl.RecordStep(t.Context(), j.ID, "later", wire.StepRequest{Lease: 1 << 40}); client.CodeOf(err) != wire.CodeStaleLease {
		t.Fatalf("a record after the attempt ended: %v, want stale_lease", err)
	}
}
