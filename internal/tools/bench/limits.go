package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/workron/workron/api/wire"
)

// The shape of claim_done_limits (issue #17: with limits on 10,000
// distinct keys, claim → done keeps at least 80 % of the throughput of the
// same run without limits).
const (
	benchLimitKeys           = 10_000 // distinct concurrency keys
	benchLimitKeyConcurrency = 1      // the queue's key_concurrency
	// benchLimitConcurrency is the queue's concurrency: checked on every
	// claim, never reached by --clients workers claiming one at a time.
	benchLimitConcurrency = 100_000
)

// claimDoneLimits runs claim_done in three shapes, each into a queue of
// its own: plain jobs in a queue without limits (claim_done_plain), jobs
// spread over benchLimitKeys keys in a queue without limits
// (claim_done_keys), and the same keyed jobs in a queue with a per-key
// concurrency of 1 and a queue concurrency (claim_done_limits). Two jobs in
// a row share a key, so the second is held back while the first runs: keys
// close and reopen all through the run. Each shape runs twice, in the
// order plain, keys, limits, limits, keys, plain, so that a load on the
// host that grows or shrinks during the bench weighs on every shape alike;
// a shape's figure is its two runs together. The last two figures compare
// claim_done_limits with claim_done_plain: jobs per second, and CPU time per
// job (the servers' and the bench's, as the figures' CPU column), which
// other processes on the host disturb less.
func (b *bencher) claimDoneLimits(ctx context.Context) ([]Figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	type shape struct {
		name    string
		keys    int
		limited bool
		note    string
	}
	shapes := []shape{
		{"claim_done_plain", 0, false, "no concurrency keys, no limits"},
		{"claim_done_keys", benchLimitKeys, false, fmt.Sprintf("%d concurrency keys, two jobs a key, no limits", benchLimitKeys)},
		{"claim_done_limits", benchLimitKeys, true, fmt.Sprintf("%d concurrency keys, two jobs a key; key_concurrency %d, concurrency %d",
			benchLimitKeys, benchLimitKeyConcurrency, benchLimitConcurrency)},
	}
	figs := make([]Figure, len(shapes))
	for run, i := range []int{0, 1, 2, 2, 1, 0} {
		sh := shapes[i]
		queue := b.queue(fmt.Sprintf("%s-%d", sh.name, run))
		if sh.limited {
			l := wire.QueueLimits{Concurrency: wire.Limit(benchLimitConcurrency), KeyConcurrency: wire.Limit(benchLimitKeyConcurrency)}
			var errs atomic.Int64
			if st, err := b.do(ctx, http.MethodPut, leader+"/queues/"+queue, mustJSON(l), nil, &errs); classify(st, err) != outOK {
				return nil, fmt.Errorf("set the limits of %s: HTTP %d %v", queue, st, err)
			}
		}
		t := newTracker()
		var errs atomic.Int64
		b.submitKeyed(ctx, leader, queue, b.cfg.Jobs, sh.keys, t, &errs)
		if got := t.accepted(); got != b.cfg.Jobs {
			return nil, fmt.Errorf("%s: pre-submitted %d of %d jobs", sh.name, got, b.cfg.Jobs)
		}
		fg := b.drainQueue(ctx, sh.name, leader, queue, 1, t, &errs)
		b.progress("bench: %s run %d: %.1f jobs/s, %.2f CPU", sh.name, run+1, fg.Value, fg.CPUCores)
		figs[i] = addRun(figs[i], fg)
		figs[i].Note = "claim max 1 (wait 1s) then POST /jobs/{id}/done per job, two runs; " + sh.note
	}
	plain, limited := figs[0], figs[len(figs)-1]
	ratio := func(name, note string, v float64) Figure {
		return Figure{Figure: name, Value: v, Unit: "%", Jobs: limited.Jobs, Clients: limited.Clients, Target: "leader",
			Correct: plain.Correct && limited.Correct, CPUCores: limited.CPUCores, Load1: limited.Load1, Note: note}
	}
	figs = append(figs,
		ratio("claim_done_limits_ratio", "claim_done_limits jobs/s as a percentage of claim_done_plain's (issue #17 asks for at least 80)",
			100*limited.Value/plain.Value),
		ratio("claim_done_limits_cpu_ratio", fmt.Sprintf("claim_done_plain's CPU time per job (%.3f ms) as a percentage of claim_done_limits' (%.3f ms)",
			cpuPerJob(plain), cpuPerJob(limited)), 100*cpuPerJob(plain)/cpuPerJob(limited)))
	return figs, nil
}

// addRun adds a run's figure to a shape's: jobs, time, errors and Raft
// entries add up; rates and CPU are over the runs together.
func addRun(sum, fg Figure) Figure {
	if sum.Figure == "" {
		return fg
	}
	cpu := sum.CPUCores*sum.Seconds + fg.CPUCores*fg.Seconds
	cmds := sum.CmdsPerEntry*sum.Entries + fg.CmdsPerEntry*fg.Entries
	sum.Jobs += fg.Jobs
	sum.Seconds += fg.Seconds
	sum.Errors += fg.Errors
	sum.Entries += fg.Entries
	sum.Elections += fg.Elections
	sum.Value = float64(sum.Jobs) / sum.Seconds
	sum.CPUCores = cpu / sum.Seconds
	if sum.Entries > 0 {
		sum.CmdsPerEntry = cmds / sum.Entries
	}
	sum.Load1 = max(sum.Load1, fg.Load1)
	sum.Correct = sum.Correct && fg.Correct
	sum.Problems = strings.Trim(sum.Problems+"; "+fg.Problems, "; ")
	return sum
}

// cpuPerJob is a figure's CPU time per job, in milliseconds.
func cpuPerJob(fg Figure) float64 {
	if fg.Jobs == 0 {
		return 0
	}
	return 1000 * fg.CPUCores * fg.Seconds / float64(fg.Jobs)
}

// submitKeyed pre-submits n jobs to queue in batches of benchBatchSize
// from benchBatchClients clients; with keys > 0, jobs 2i and 2i+1 carry
// key i mod keys.
func (b *bencher) submitKeyed(ctx context.Context, target, queue string, n, keys int, t *tracker, errs *atomic.Int64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchBatchClients {
		wg.Go(func() {
			for ctx.Err() == nil {
				from := int(next.Add(benchBatchSize)) - benchBatchSize
				if from >= n {
					return
				}
				jobs := make([]wire.SubmitRequest, min(benchBatchSize, n-from))
				for i := range jobs {
					jobs[i] = wire.SubmitRequest{Command: "true", Queue: queue}
					if keys > 0 {
						jobs[i].ConcurrencyKey = fmt.Sprintf("tenant-%05d", (from+i)/2%keys)
					}
				}
				body := mustJSON(wire.BatchSubmitRequest{Jobs: jobs})
				if len(jobs) == 1 {
					body = mustJSON(jobs[0]) // submit sends one job to POST /jobs
				}
				b.submit(ctx, target, body, len(jobs), t, errs)
			}
		})
	}
	wg.Wait()
}
