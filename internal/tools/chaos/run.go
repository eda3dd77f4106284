//go:build unix

package chaos

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a run.
type Config struct {
	// Seed drives every random choice of the harness (faults, their
	// targets and timing, the job mix). Timing still depends on the
	// machine, so a replay repeats the same faults in the same order, not
	// the same interleaving. Defaults to the time.
	Seed uint64
	// Duration is how long load and faults run. Defaults to 90s.
	Duration time.Duration
	// Nodes is 3 or 5. Defaults to 3.
	Nodes int
	// RealWorkers is how many `workron worker` processes run beside the
	// virtual workers. Defaults to 2.
	RealWorkers int
	// VirtualWorkers is how many recorded workers the harness runs.
	// Defaults to 6.
	VirtualWorkers int
	// DurableWorkers is how many chaosworker processes serve the durable
	// jobs (durable.go). Defaults to 2; negative: none, and no durable
	// jobs.
	DurableWorkers int
	// DurableRate is durable jobs submitted per second. Defaults to 1.5.
	DurableRate float64
	// SubmitRate is jobs submitted per second. Defaults to 8, about what the
	// workers finish under faults: a higher rate builds a backlog that the
	// drain must then work off.
	SubmitRate float64
	// Faults are the fault kinds to inject (see AllFaults); nil means all
	// that the machine allows, none means a run without faults.
	Faults []string
	// NoNetns runs on loopback even as root (no network faults).
	NoNetns bool
	// Dir holds data, logs and the history. Defaults to a new temporary
	// directory, removed after a clean run.
	Dir string
	// Bin is the workron binary; built (without -race) when empty.
	Bin string
	// PlantRerun plants a fault in the durable workers (their first step
	// runs again after the first attempt, without the journal), to show
	// the durable checks report it.
	PlantRerun bool
	// DurableBin is the chaosworker binary (cmd/chaosworker); built
	// when empty.
	DurableBin string
	// DrainTimeout is how long the drain after healing may go without any
	// job finishing before the harness stops waiting for the rest.
	// Defaults to 60s.
	DrainTimeout time.Duration
	// Log receives progress lines. Defaults to os.Stderr.
	Log io.Writer
}

// Report is what a run found.
type Report struct {
	Seed     uint64        `json:"seed"`
	Nodes    int           `json:"nodes"`
	Duration time.Duration `json:"duration_ns"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Network  string        `json:"network"`
	Dir      string        `json:"dir"`

	Faults      map[string]int `json:"faults"`
	FaultsTotal int            `json:"faults_total"`
	FaultErrors []string       `json:"fault_errors,omitempty"`

	Submitted int `json:"submitted"` // jobs the load meant to submit
	Accepted  int `json:"accepted"`  // of them, answered with a 2xx
	Jobs      int `json:"jobs"`      // jobs the cluster has
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Pending   int `json:"pending"` // waiting for a retry due later

	Requests     int64 `json:"requests"`
	Ops          int   `json:"ops"`          // recorded operations
	UnknownOps   int   `json:"unknown_ops"`  // of them with an unknown outcome
	Synthesized  int   `json:"synthesized"`  // unknown claims matched to attempts
	Linearizable int   `json:"linearizable"` // jobs whose history was checked
	CronTicks    int   `json:"cron_ticks"`   // the schedule's ticks, first to last
	CronJobs     int   `json:"cron_jobs"`    // of them, run
	CronMissed   int   `json:"cron_missed"`  // of them, missed beyond catch-up
	// LimitedAttempts are the attempts of the limited queue's jobs, and
	// LimitPeak and KeyLimitPeak the most of them that held a lease at
	// once, in all and of one key (see limits.go).
	LimitedAttempts int    `json:"limited_attempts"`
	LimitPeak       int    `json:"limit_peak"`
	KeyLimitPeak    int    `json:"key_limit_peak"`
	Abandoned       int64  `json:"abandoned"`     // jobs a virtual worker walked away from
	AppliedIndex    uint64 `json:"applied_index"` // every node's, at the end
	Digest          string `json:"digest"`

	// The durable jobs (durable.go, durcheck.go): accepted, done and
	// failed; step runs the ledger shows, steps the journals hold, runs
	// never recorded, and runs by stale attempts.
	DurableJobs    int `json:"durable_jobs"`
	DurableDone    int `json:"durable_done"`
	DurableFailed  int `json:"durable_failed"`
	StepRuns       int `json:"step_runs"`
	StepRecords    int `json:"step_records"`
	StepUnrecorded int `json:"step_unrecorded"`
	StepStale      int `json:"step_stale"`
	// Their sleeps that woke, waits that got their event (of them sent
	// before the wait began), timed out, or lost it to a clock jump, and
	// their child jobs.
	Sleeps        int `json:"sleeps"`
	EventsHeard   int `json:"events_heard"`
	EventsBefore  int `json:"events_before_wait"`
	WaitTimeouts  int `json:"wait_timeouts"`
	EventsExcused int `json:"events_excused"`
	Children      int `json:"children"`

	Anomalies      []string `json:"anomalies"`
	Visualizations []string `json:"visualizations,omitempty"`
}

// OK reports whether the run found no anomaly.
func (r *Report) OK() bool { return len(r.Anomalies) == 0 }

func (c *Config) defaults() {
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Duration == 0 {
		c.Duration = 90 * time.Second
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.RealWorkers == 0 {
		c.RealWorkers = 2
	}
	if c.VirtualWorkers == 0 {
		c.VirtualWorkers = 6
	}
	if c.DurableWorkers == 0 {
		c.DurableWorkers = 2
	}
	if c.DurableWorkers < 0 {
		c.DurableWorkers, c.DurableRate = 0, 0
	} else if c.DurableRate == 0 {
		c.DurableRate = 1.5
	}
	if c.SubmitRate == 0 {
		c.SubmitRate = 8
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 60 * time.Second
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
}

// Run starts a cluster, runs the load and faults, heals, waits for
// quiescence and checks. The error is for a harness that could not run;
// what the run found is in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		return nil, fmt.Errorf("chaos: nodes must be 3 or 5, got %d", cfg.Nodes)
	}
	for _, f := range cfg.Faults {
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("chaos: unknown fault %q (known: %s)", f, strings.Join(AllFaults, ", "))
		}
	}
	r := &runner{cfg: cfg, begin: time.Now(), rep: &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Duration: cfg.Duration}}
	r.logf("seed %d (replay: --seed %d), %d nodes, %s of faults", cfg.Seed, cfg.Seed, cfg.Nodes, cfg.Duration)
	removeDir, err := r.prepare()
	if err != nil {
		return nil, err
	}
	nw, netOK, err := openNetwork(r.cfg, r.logf)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := nw.close(); err != nil {
			r.logf("removing the network: %v", err)
		}
	}()
	r.rep.Network = nw.describe()
	r.c = newCluster(r.cfg.Dir, r.cfg.Bin, r.cfg.DurableBin, nw, cfg.Nodes, cfg.RealWorkers, r.cfg.DurableWorkers, r.logf)
	r.c.plant = cfg.PlantRerun
	defer r.c.stopAll()
	if err := startAll(ctx, r.c); err != nil {
		return r.rep, err
	}
	defer r.c.pc.HTTP.CloseIdleConnections()
	if err := createSchedule(ctx, r.c); err != nil {
		return r.rep, fmt.Errorf("chaos: create the schedule: %w", err)
	}
	if err := setLimits(ctx, r.c); err != nil {
		return r.rep, fmt.Errorf("chaos: set the limits of %s: %w", limitedQueue, err)
	}
	r.l = newLoad(r.c, newRecorder(), cfg.Seed, cfg.VirtualWorkers)
	defer r.l.closeIdle()
	r.in = newInjector(r.c, r.l, netOK, r.logf)

	r.loadAndFaults(ctx, r.usableFaults(netOK))
	r.check(ctx)
	r.rep.Elapsed = time.Since(r.begin)
	if r.rep.OK() && removeDir {
		r.c.stopAll()
		_ = os.RemoveAll(r.cfg.Dir)
		r.rep.Dir = ""
	}
	return r.rep, nil
}

// runner is one run's state.
type runner struct {
	cfg   Config
	begin time.Time
	rep   *Report
	logMu sync.Mutex
	c     *cluster
	l     *load
	in    *injector
}

func (r *runner) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.cfg.Log, "chaos %6.1fs "+format+"\n", append([]any{time.Since(r.begin).Seconds()}, args...)...)
}

// prepare makes the directory (reporting whether to remove it after a
// clean run) and the binary.
func (r *runner) prepare() (bool, error) {
	removeDir := false
	if r.cfg.Dir == "" {
		d, err := os.MkdirTemp("", "workron-chaos-")
		if err != nil {
			return false, err
		}
		r.cfg.Dir, removeDir = d, true
	} else if err := os.MkdirAll(r.cfg.Dir, 0o755); err != nil {
		return false, err
	}
	r.rep.Dir = r.cfg.Dir
	var pkgs []string
	if r.cfg.Bin == "" {
		pkgs = append(pkgs, "github.com/workron/workron/cmd/workron")
		r.cfg.Bin = filepath.Join(r.cfg.Dir, "workron")
	}
	if r.cfg.DurableBin == "" && r.cfg.DurableWorkers > 0 {
		pkgs = append(pkgs, "github.com/workron/workron/internal/tools/chaos/cmd/chaosworker")
		r.cfg.DurableBin = filepath.Join(r.cfg.Dir, "chaosworker")
	}
	if err := buildBinaries(r.cfg.Dir, pkgs...); err != nil {
		return false, err
	}
	return removeDir, nil
}

// usableFaults are the configured faults the network allows.
func (r *runner) usableFaults(netOK bool) []string {
	faults := r.cfg.Faults
	if faults == nil {
		faults = AllFaults
	}
	if netOK {
		return faults
	}
	var kept []string
	for _, f := range faults {
		if !slices.Contains(networkFaults, f) {
			kept = append(kept, f)
		}
	}
	if len(kept) < len(faults) {
		r.logf("without network namespaces these faults are left out: %s", strings.Join(networkFaults, ", "))
	}
	return kept
}

// loadAndFaults runs the load and the faults for the configured duration,
// heals, lets the workers finish every job, then stops them.
func (r *runner) loadAndFaults(ctx context.Context, faults []string) {
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var workersWG, loadWG sync.WaitGroup
	faultCtx, stopFaults := context.WithTimeout(runCtx, r.cfg.Duration)
	defer stopFaults()
	loadWG.Go(func() { r.l.submitters(faultCtx, runCtx, r.cfg.SubmitRate) })
	loadWG.Go(func() { r.l.durableSubmitters(faultCtx, runCtx, r.cfg.DurableRate) })
	for i, w := range r.l.vworkers {
		workersWG.Go(func() { w.run(runCtx, r.cfg.Seed+uint64(i)*7919) })
	}
	workersWG.Go(func() { r.l.readers(runCtx, 2) })
	go r.progress(faultCtx)
	r.in.run(faultCtx, faults, r.cfg.Seed)
	<-faultCtx.Done()
	r.logf("faults over; healing everything")
	r.in.healAll(ctx)
	if _, err := r.c.waitLeader(ctx, 30*time.Second); err != nil {
		r.rep.Anomalies = append(r.rep.Anomalies, "after healing: "+err.Error())
	}
	if err := pauseSchedule(ctx, r.c); err != nil {
		r.rep.Anomalies = append(r.rep.Anomalies, "pause the schedule after healing: "+err.Error())
	}
	loadWG.Wait() // every submit got its answer (or runCtx ended)
	r.l.rescueEvents(runCtx)
	r.logf("draining: waiting for every job to finish (giving up after %s without progress)", r.cfg.DrainTimeout)
	if !waitFinished(ctx, r.c, r.cfg.DrainTimeout, r.logf) {
		r.logf("draining stalled: no job finished for %s", r.cfg.DrainTimeout)
	}
	stopRun()
	workersWG.Wait()
	for _, w := range r.c.workers {
		w.Kill()
	}
}

func (r *runner) progress(ctx context.Context) {
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.l.mu.Lock()
			acc := len(r.l.accepted)
			r.l.mu.Unlock()
			_, total, _ := r.in.summary()
			r.logf("%d jobs accepted, %d faults so far", acc, total)
		}
	}
}

// check compares the replicas, reads the final state and checks it and the
// history.
func (r *runner) check(ctx context.Context) {
	rep, l := r.rep, r.l
	rep.AppliedIndex, rep.Digest = checkReplicas(ctx, r.c, rep, r.logf)
	jobs, err := listAll(ctx, r.c, chaosQueue)
	if err != nil {
		rep.Anomalies = append(rep.Anomalies, "final listing: "+err.Error())
	}
	limited, err := listAll(ctx, r.c, limitedQueue)
	switch {
	case err != nil:
		rep.Anomalies = append(rep.Anomalies, "final listing of the limited queue: "+err.Error())
	case len(limited) == 0:
		rep.Anomalies = append(rep.Anomalies, "queue "+limitedQueue+" has no jobs: its limits were not exercised")
	}
	jobs = append(jobs, limited...)
	cronJobs, err := listAll(ctx, r.c, cronQueue)
	if err != nil {
		rep.Anomalies = append(rep.Anomalies, "final listing of the schedule's queue: "+err.Error())
	}
	sc, err := readSchedule(ctx, r.c)
	if err != nil {
		rep.Anomalies = append(rep.Anomalies, "read the schedule: "+err.Error())
	}
	durJobs, err := listAll(ctx, r.c, durableQueue)
	if err != nil {
		rep.Anomalies = append(rep.Anomalies, "final listing of the durable queue: "+err.Error())
	}
	journals, err := readJournals(ctx, r.c, durJobs)
	if err != nil {
		rep.Anomalies = append(rep.Anomalies, "reading the journals: "+err.Error())
	}
	for _, w := range r.c.durableWorkers() {
		for _, msg := range w.Crashes() {
			rep.Anomalies = append(rep.Anomalies, msg+"; see "+w.Log)
		}
	}
	for _, n := range r.c.nodes {
		for _, msg := range n.Crashes() {
			rep.Anomalies = append(rep.Anomalies, msg+"; see "+n.Log)
		}
		if s := panics(n.Log); s != "" {
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("%s logged a panic: %s", n.Name, s))
		}
	}
	rep.Faults, rep.FaultsTotal, rep.FaultErrors = r.in.summary()
	ops := l.rec.history()
	if err := writeHistory(filepath.Join(r.cfg.Dir, "history.jsonl"), ops); err != nil {
		r.logf("writing the history: %v", err)
	}
	l.mu.Lock()
	in := checkInput{ops: ops, specs: l.specs, accepted: l.accepted, jobs: jobs, schedule: sc, cronJobs: cronJobs, virtual: l.isVirtual,
		dir: r.cfg.Dir, timeout: 20 * time.Second,
		durable: durableInput{accepted: maps.Clone(l.durAccepted), jobs: durJobs, journals: journals,
			events: maps.Clone(l.events), clockJumps: r.in.clockJumps()}}
	rep.Submitted, rep.Accepted = len(l.specs), len(l.accepted)
	rep.Anomalies = append(rep.Anomalies, l.invalid...)
	l.mu.Unlock()
	var vids []string
	for _, w := range l.vworkers {
		vids = append(vids, w.id)
		rep.Abandoned += w.abandoned.Load()
	}
	if err := saveRun(r.cfg.Dir, in, vids); err != nil {
		r.logf("saving the final state: %v", err)
	}
	if in.durable.ledger, err = readLedger(r.c.ledger); err != nil {
		rep.Anomalies = append(rep.Anomalies, "reading the ledger: "+err.Error())
	}
	if r.cfg.DurableWorkers > 0 && len(in.durable.accepted) == 0 {
		rep.Anomalies = append(rep.Anomalies, "no durable job was accepted: the durable checks checked nothing")
	}
	r.logf("checking %d jobs and %d recorded operations", len(jobs), len(ops))
	res := checkJobs(in)
	rep.Jobs, rep.Done, rep.Failed, rep.Pending = res.Jobs, res.Done, res.Failed, res.Pending
	rep.Ops, rep.UnknownOps, rep.Synthesized, rep.Linearizable = res.Ops, res.Unknown, res.Synthesized, res.Checked
	rep.Anomalies = append(rep.Anomalies, res.Anomalies...)
	rep.Visualizations = res.Visualizations
	rep.CronTicks, rep.CronJobs, rep.CronMissed = res.Cron.Ticks, res.Cron.Jobs, res.Cron.Missed
	rep.LimitedAttempts, rep.LimitPeak, rep.KeyLimitPeak = res.Limits.Attempts, res.Limits.Peaks.Queue, res.Limits.Peaks.Key
	r.logf("limited queue %s: %s", limitedQueue, res.Limits)
	d := res.Durable
	rep.DurableJobs, rep.DurableDone, rep.DurableFailed = d.Jobs, d.Done, d.Failed
	rep.StepRuns, rep.StepRecords, rep.StepUnrecorded, rep.StepStale = d.Runs, d.Records, d.Unrecorded, d.Stale
	rep.Sleeps, rep.EventsHeard, rep.EventsBefore, rep.WaitTimeouts, rep.EventsExcused, rep.Children = d.Sleeps, d.Heard, d.Before, d.TimedOut, d.Excused, d.Children
	r.logf("durable jobs: %s", d)
	rep.Requests = l.stats.submits.Load() + l.stats.claims.Load() + l.stats.heartbeats.Load() + l.stats.reports.Load() + l.stats.gets.Load()
}
