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
	"github.com/workron/workron/worker"
	"github.com/workron/workron/worker/client"
)

// TestJobsSeeEveryParentResult: a claim reply carries at most
// wire.MaxClaimJobParentBytes of a job's parent results; the worker reads
// the rest by pages before it runs the job, so a handler and a shell
// command each see all 20 of their parents' 60 KiB results.
func TestJobsSeeEveryParentResult(t *testing.T) {
	const parents, pad = 20, 60 << 10
	c := clustertest.New(t, 1)
	cfg := client.DefaultConfig()
	cfg.Servers = []string{c.URL(0)}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := t.Context()

	var reqs []wire.SubmitRequest
	var deps []string
	for i := range parents {
		reqs = append(reqs, wire.SubmitRequest{Type: "parent", Payload: json.RawMessage(fmt.Sprint(i))})
		deps = append(deps, fmt.Sprintf("$%d", i))
	}
	// The shell child counts its parents' results in the file the worker
	// writes them to (over 64 KiB: not in the environment).
	count := `n=$(grep -o '"pad"' "$WORKRON_PARENT_RESULTS_FILE" | wc -l); printf '{"n":%d}' "$n" > "$WORKRON_RESULT_FILE"`
	reqs = append(reqs,
		wire.SubmitRequest{Type: "child", DependsOn: deps},
		wire.SubmitRequest{Command: count, DependsOn: deps})
	jobs, err := cl.SubmitBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, testConfig(t, c.URL(0)), func(w *worker.Worker) {
		w.Handle("parent", func(_ context.Context, job *worker.Job) error {
			return job.SetResult(map[string]string{"parent": job.ID, "pad": strings.Repeat("x", pad)})
		})
		w.Handle("child", func(_ context.Context, job *worker.Job) error {
			for id := range job.ParentResults {
				var r struct{ Parent string }
				if err := job.ParentResult(id, &r); err != nil || r.Parent != id {
					return worker.NoRetry(fmt.Errorf("parent %s: result of %q, %v", id, r.Parent, err))
				}
			}
			return job.SetResult(map[string]int{"n": len(job.ParentResults)})
		})
	})
	for _, child := range jobs[parents:] {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		j, err := cl.Wait(wctx, child.ID, 20*time.Millisecond)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ N int }
		if j.Status != wire.StatusDone || json.Unmarshal(j.Result, &got) != nil || got.N != parents {
			t.Errorf("child %s (%s): %s, result %s, error %q; want done seeing %d parent results", j.ID, j.Type, j.Status, j.Result, j.LastError, parents)
		}
	}
}
