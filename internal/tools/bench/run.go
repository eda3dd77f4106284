package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Run runs the scenarios of cfg against a cluster, its own (three nodes in
// this process on 127.0.0.1, fsync'd, 500ms Raft timeouts, in a temporary
// directory) or the one cfg.Servers names, through the HTTP API only:
//
//   - submit_single: Clients clients POST /jobs one job at a time, to the
//     leader and (submit_single_follower, a quarter as many) via a follower;
//   - submit_batch: benchBatchClients clients POST /jobs/batch, asking for
//     the minimal reply (the ids; every batch the bench sends does);
//     submit_batch_metadata: the same of typed jobs of several queues,
//     types and concurrency keys and metadata of a value each
//     (metadataShape), the search index's worst case;
//   - claim_done, claim_done_piggyback, claim_done_batched: Clients
//     virtual workers claim (max 1, or benchBatchedClaimMax) and report done
//     (on its own, or on the next claim) until Jobs jobs are done;
//   - claim_done_worker: one Go SDK worker with Clients slots runs Jobs
//     typed jobs (goworker.go);
//   - claim_done_limits: claim_done without keys, with 10,000 concurrency
//     keys, and with them under a per-key limit, and the ratio (limits.go);
//   - latency: submits at Rate for Duration while LatencyWorkers
//     long-polling workers claim; submit→start percentiles;
//   - real_workers, failover, large_store, bulk_retry_kill: real
//     processes (see each);
//   - step_record, step_jobs, step_resume: durable steps through the Go
//     SDK's job.Step (steps.go); event_wake: POST /events to the waiting
//     job's next attempt (events.go).
//
// Each scenario uses its own queue and checks what it did: every attempt
// claimed once, every job done exactly once (or left pending), and the
// leader's queue counts, listing and a sample of jobs agree. Run prints the
// figures to cfg.Stdout and fails if a check fails, never because of speed.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	b := newBencher(cfg)
	defer b.hc.CloseIdleConnections()
	if len(cfg.Servers) > 0 {
		for _, u := range cfg.Servers {
			b.nodes = append(b.nodes, strings.TrimRight(u, "/"))
		}
	} else {
		c, err := startInprocCluster(ctx, b)
		if err != nil {
			return err
		}
		defer c.stop()
		b.nodes = c.urls
	}
	b.progress("bench: %d CPUs, GOMAXPROCS %d, load average %.1f, nodes %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAverage(), strings.Join(b.nodes, " "))
	var figs []Figure
	for _, s := range cfg.Scenarios {
		b.progress("bench: %s", s)
		got, err := b.run(ctx, s)
		figs = append(figs, got...)
		if err != nil {
			printFigures(cfg.Stdout, cfg.Output, figs) // what was measured before it stopped
			return fmt.Errorf("bench %s: %w", s, err)
		}
	}
	printFigures(cfg.Stdout, cfg.Output, figs)
	var bad []string
	for _, fg := range figs {
		if !fg.Correct {
			bad = append(bad, fg.Figure)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("bench: correctness check failed: %s", strings.Join(bad, ", "))
	}
	return nil
}

// run runs one scenario.
func (b *bencher) run(ctx context.Context, name string) ([]Figure, error) {
	switch name {
	case "submit_single":
		return b.submitSingle(ctx)
	case "submit_batch":
		return b.submitBatch(ctx)
	case "submit_batch_metadata":
		return b.submitBatchMetadata(ctx)
	case "claim_done":
		return b.claimDone(ctx, name, 1)
	case "claim_done_piggyback":
		return b.claimDone(ctx, name, 1)
	case "claim_done_batched":
		return b.claimDone(ctx, name, benchBatchedClaimMax)
	case "claim_done_worker":
		return b.claimDoneWorker(ctx)
	case "claim_done_limits":
		return b.claimDoneLimits(ctx)
	case "latency":
		return b.latency(ctx)
	case "real_workers":
		return b.realWorkers(ctx)
	case "failover":
		return b.failover(ctx)
	case "large_store":
		return b.largeStore(ctx)
	case "bulk_retry":
		return b.bulkRetry(ctx)
	case "bulk_retry_kill":
		return b.bulkRetryKill(ctx)
	case "step_record":
		return b.stepRecord(ctx)
	case "step_jobs":
		return b.stepJobs(ctx)
	case "step_resume":
		return b.stepResume(ctx)
	case "event_wake":
		return b.eventWake(ctx)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// Figure is one measured number, printed as a table row and a JSON line.
type Figure struct {
	Figure       string  `json:"figure"`
	Value        float64 `json:"value"`
	Unit         string  `json:"unit"`
	Jobs         int     `json:"jobs"`
	Seconds      float64 `json:"seconds"`
	Clients      int     `json:"clients,omitempty"`
	Target       string  `json:"target,omitempty"`
	Errors       int64   `json:"errors"`
	Entries      float64 `json:"raft_entries,omitempty"`
	CmdsPerEntry float64 `json:"cmds_per_entry,omitempty"`
	CPUCores     float64 `json:"cpu_cores"`
	// Allocs is the heap objects the process allocated during the phase:
	// with an in-process cluster, the nodes' and the load generator's.
	Allocs    float64 `json:"allocs,omitempty"`
	Load1     float64 `json:"load1,omitempty"`
	Elections float64 `json:"elections,omitempty"` // Raft terms that began during the phase
	// StagesMS is the mean milliseconds of each stage of the leader's
	// entries during the phase (workron_raft_stage_seconds).
	StagesMS map[string]float64 `json:"stages_ms,omitempty"`
	// HandedOff is the jobs the leader leased to a waiting worker in the
	// entry that submitted them during the phase.
	HandedOff float64 `json:"handed_off,omitempty"`
	// StagesP99MS is the 99th percentile of each stage during the phase,
	// as the upper bound of the histogram bucket that holds it (ms; -1:
	// over the top bound, 1 s).
	StagesP99MS map[string]float64 `json:"stages_p99_ms,omitempty"`
	// StagesMaxMS is the longest of each stage during the phase, as the
	// upper bound of its bucket (ms; -1 as above).
	StagesMaxMS map[string]float64 `json:"stages_max_ms,omitempty"`
	// GCCycles and GCPauseMaxMS are this process's collections during the
	// phase and its longest stop-the-world pause for them (the upper
	// bound of runtime/metrics' bucket, ms): with an in-process cluster,
	// the nodes' collections.
	GCCycles     float64 `json:"gc_cycles,omitempty"`
	GCPauseMaxMS float64 `json:"gc_pause_max_ms,omitempty"`
	Correct      bool    `json:"correct"`
	Problems     string  `json:"problems,omitempty"`
	Note         string  `json:"note,omitempty"`
}

// check records the correctness problems found for the figure.
func (fg *Figure) check(problems ...[]string) {
	var all []string
	for _, p := range problems {
		all = append(all, p...)
	}
	fg.Correct = len(all) == 0
	if len(all) > benchMaxProblems {
		all = append(all[:benchMaxProblems], fmt.Sprintf("and %d more", len(all)-benchMaxProblems))
	}
	fg.Problems = strings.Join(all, "; ")
}

func printFigures(w io.Writer, output string, figs []Figure) {
	if output == "table" {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "FIGURE\tVALUE\tUNIT\tJOBS\tSECONDS\tCLIENTS\tERRORS\tENTRIES\tCMDS/ENTRY\tCPU\tLOAD\tTERMS\tCHECK\t")
		for _, f := range figs {
			check := "ok"
			if !f.Correct {
				check = "FAILED"
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t%d\t%.2f\t%d\t%d\t%.0f\t%.1f\t%.2f\t%.1f\t%.0f\t%s\t\n",
				f.Figure, f.Value, f.Unit, f.Jobs, f.Seconds, f.Clients, f.Errors, f.Entries, f.CmdsPerEntry, f.CPUCores, f.Load1, f.Elections, check)
		}
		tw.Flush()
		for _, f := range figs {
			if f.Problems != "" {
				fmt.Fprintf(w, "%s: %s\n", f.Figure, f.Problems)
			}
		}
	}
	enc := json.NewEncoder(w)
	for _, f := range figs {
		_ = enc.Encode(f)
	}
}

// bencher holds what every scenario uses.
type bencher struct {
	cfg    Config
	hc     *http.Client
	nodes  []string
	runID  string
	stderr io.Writer

	// profile is CPUProfile; with a single scenario, profileOnly names
	// the one phase that writes it.
	profile, profileOnly string
	profiling            *os.File

	errMu    sync.Mutex
	errShown int
}

func newBencher(cfg Config) *bencher {
	b := &bencher{
		cfg:     cfg,
		hc:      newHTTPClient(cfg.Clients*2 + 32),
		runID:   strconv.FormatInt(time.Now().UnixMilli()%1e9, 36),
		stderr:  cfg.Stderr,
		profile: cfg.CPUProfile,
	}
	if len(cfg.Scenarios) == 1 {
		b.profileOnly = cfg.Scenarios[0]
	}
	return b
}

func (b *bencher) progress(format string, args ...any) {
	fmt.Fprintf(b.stderr, format+"\n", args...)
}

// noteError prints the first few unexpected replies, so a broken run says why.
func (b *bencher) noteError(what string, status int, err error) {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	if b.errShown >= 10 {
		return
	}
	b.errShown++
	b.progress("bench: %s: HTTP %d %v", what, status, err)
}

// queue names a scenario's own queue; nothing else serves it.
func (b *bencher) queue(scenario string) string {
	return "bench-" + b.runID + "-" + strings.ReplaceAll(scenario, "_", "-")
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("bench: encode %T: %v", v, err))
	}
	return data
}
