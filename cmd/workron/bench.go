package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
)

// benchScenarios are the scenarios `workron bench` knows, in the order it
// runs them.
var benchScenarios = []string{"submit_single", "submit_batch", "claim_done", "claim_done_piggyback", "claim_done_batched", "latency", "real_workers", "failover", "large_store"}

// Fixed shapes of the scenarios.
const (
	benchBatchSize       = 1000 // jobs per POST /jobs/batch: the server's default cap
	benchBatchClients    = 4    // concurrent batch submitters
	benchBatchedClaimMax = 16   // max of one claim in claim_done_batched
	benchLatencyWorkers  = 8    // long-polling workers of the latency scenario
	benchLatencyInflight = 64   // most submissions in flight in the latency scenario
	benchSampleGets      = 25   // jobs read back one by one after each scenario
	benchMaxProblems     = 5    // correctness problems quoted per figure

	// benchRetryFor is how long a request is retried while the cluster
	// answers that nothing was done (an election, say).
	benchRetryFor = 30 * time.Second
)

// benchFlags are everything `workron bench` takes.
type benchFlags struct {
	short      bool
	servers    string
	clients    int
	jobs       int
	rate       float64
	duration   time.Duration
	submitFor  time.Duration
	scenarios  string
	output     string
	cpuprofile string
	procs      procBenchFlags // the scenarios with real processes (bench_procs.go)
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.short, "short", false, "quick correctness run: --jobs 2000 and --duration 3s unless given; well under a minute")
	fs.StringVar(&f.servers, "server", "", "bench an existing cluster at these node URLs (comma-separated) instead of starting three nodes in-process")
	fs.IntVar(&f.clients, "clients", 64, "concurrent single-job submitters, and virtual workers of the claim scenarios")
	fs.IntVar(&f.jobs, "jobs", 20000, "jobs of submit_single and of each claim scenario; submit_batch sends twice as many")
	fs.Float64Var(&f.rate, "rate", 200, "submissions per second in the latency scenario")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long the latency scenario submits")
	fs.DurationVar(&f.submitFor, "submit-for", 0, "run submit_single and submit_batch for this long instead of a job count")
	fs.StringVar(&f.scenarios, "scenarios", strings.Join(benchScenarios, ","), "scenarios to run, comma-separated")
	fs.StringVar(&f.output, "o", "table", "output: table (a table, then one JSON line per figure) or json (JSON lines only)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole process during each scenario's timed phase to `FILE` (FILE.SCENARIO when several run)")
	f.procs.register(fs)
}

// validate names the first flag out of bounds and applies --short's defaults.
func (f *benchFlags) validate(set map[string]bool) error {
	if f.short {
		if !set["jobs"] {
			f.jobs = 2000
		}
		if !set["duration"] {
			f.duration = 3 * time.Second
		}
	}
	switch {
	case f.clients < 1:
		return fmt.Errorf("--clients must be at least 1, got %d", f.clients)
	case f.jobs < 1:
		return fmt.Errorf("--jobs must be at least 1, got %d", f.jobs)
	case f.rate <= 0 || math.IsInf(f.rate, 0) || math.IsNaN(f.rate):
		return fmt.Errorf("--rate must be a positive number, got %v", f.rate)
	case f.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %s", f.duration)
	case f.submitFor < 0:
		return fmt.Errorf("--submit-for must not be negative, got %s", f.submitFor)
	case f.output != "table" && f.output != "json":
		return fmt.Errorf("-o: %q is not table or json", f.output)
	}
	for _, s := range splitList(f.scenarios) {
		if !slices.Contains(benchScenarios, s) {
			return fmt.Errorf("--scenarios: unknown scenario %q (known: %s)", s, strings.Join(benchScenarios, ", "))
		}
	}
	if err := f.procs.validate(f.short, set); err != nil {
		return err
	}
	if len(splitList(f.scenarios)) == 0 {
		return errors.New("--scenarios: name at least one scenario")
	}
	return nil
}

// runBench is `workron bench`. It measures a cluster, its own (three nodes
// in this process on 127.0.0.1, fsync'd, 500ms Raft timeouts, in a temporary
// directory) or the one --server names, through the HTTP API only:
//
//   - submit_single: --clients clients POST /jobs one job at a time, to the
//     leader and (submit_single_follower, a quarter as many) via a follower;
//   - submit_batch: benchBatchClients clients POST /jobs/batch;
//   - claim_done, claim_done_batched: --clients virtual workers claim (max 1,
//     or benchBatchedClaimMax) and report done until --jobs jobs are done;
//   - latency: submits at --rate for --duration while benchLatencyWorkers
//     long-polling workers claim; submit→start percentiles.
//
// Each scenario uses its own queue and checks what it did: every attempt
// claimed once, every job done exactly once (or left pending), and the
// leader's queue counts, listing and a sample of jobs agree. runBench fails
// if a check fails, never because of speed.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f benchFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := f.validate(set); err != nil {
		return err
	}
	b := newBencher(f, stderr)
	defer b.hc.CloseIdleConnections()
	if f.servers != "" {
		b.nodes = splitList(f.servers)
		for i, u := range b.nodes {
			b.nodes[i] = strings.TrimRight(u, "/")
		}
	} else {
		c, err := startBenchCluster(ctx, b, stderr)
		if err != nil {
			return err
		}
		defer c.stop()
		b.nodes = c.urls
	}
	b.progress("bench: %d CPUs, GOMAXPROCS %d, load average %.1f, nodes %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAverage(), strings.Join(b.nodes, " "))
	var figs []figure
	for _, s := range splitList(f.scenarios) {
		b.progress("bench: %s", s)
		got, err := b.run(ctx, s)
		if err != nil {
			return fmt.Errorf("bench %s: %w", s, err)
		}
		figs = append(figs, got...)
	}
	printFigures(stdout, f.output, figs)
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
func (b *bencher) run(ctx context.Context, name string) ([]figure, error) {
	switch name {
	case "submit_single":
		return b.submitSingle(ctx)
	case "submit_batch":
		return b.submitBatch(ctx)
	case "claim_done":
		return b.claimDone(ctx, name, 1)
	case "claim_done_piggyback":
		return b.claimDone(ctx, name, 1)
	case "claim_done_batched":
		return b.claimDone(ctx, name, benchBatchedClaimMax)
	case "latency":
		return b.latency(ctx)
	case "real_workers":
		return b.realWorkers(ctx)
	case "failover":
		return b.failover(ctx)
	case "large_store":
		return b.largeStore(ctx)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// figure is one measured number, printed as a table row and a JSON line.
type figure struct {
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
	Load1        float64 `json:"load1,omitempty"`
	Elections    float64 `json:"elections,omitempty"` // Raft terms that began during the phase
	Correct      bool    `json:"correct"`
	Problems     string  `json:"problems,omitempty"`
	Note         string  `json:"note,omitempty"`
}

// check records the correctness problems found for the figure.
func (fg *figure) check(problems ...[]string) {
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

func printFigures(w io.Writer, output string, figs []figure) {
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

// benchCluster is three nodes started in this process.
type benchCluster struct {
	dir     string
	urls    []string
	servers []*runningServer
}

// startBenchCluster starts three nodes on 127.0.0.1 with free ports, the
// default (fsync'd) storage settings and 500ms Raft timeouts, and waits
// until all three agree on a leader that knows every member's address.
func startBenchCluster(ctx context.Context, b *bencher, stderr io.Writer) (*benchCluster, error) {
	dir, err := os.MkdirTemp("", "workron-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench data dir: %w", err)
	}
	c := &benchCluster{dir: dir}
	fail := func(err error) (*benchCluster, error) {
		c.stop()
		return nil, err
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("bench%d", i)
		f, err := benchServerFlags(id, filepath.Join(dir, id), c.urls)
		if err != nil {
			return fail(err)
		}
		// The nodes' own logs (Raft's complaints while the cluster shuts
		// down, mostly) would bury the figures: show them only on request.
		logOut := io.Discard
		if os.Getenv("WORKRON_BENCH_LOG") != "" {
			logOut = stderr
		}
		logger, err := f.logs.logger(logOut)
		if err != nil {
			return fail(err)
		}
		srv, err := startServer(f, logger.With("node", id))
		if err != nil {
			return fail(fmt.Errorf("start node %s: %w", id, err))
		}
		c.servers = append(c.servers, srv)
		c.urls = append(c.urls, srv.advertise)
		// The first node bootstraps and the others join through it: wait
		// until it leads, then until all agree.
		if i == 1 || i == 3 {
			if err := waitUntil(ctx, 30*time.Second, func() bool { return b.healthy(ctx, c.urls) }); err != nil {
				return fail(fmt.Errorf("wait for %d nodes to agree on a leader: %w", i, err))
			}
		}
	}
	return c, nil
}

// benchServerFlags parses a node's flags the way `workron server` does, so
// it gets the server's defaults (state and Raft log fsync'd).
func benchServerFlags(id, dir string, join []string) (serverFlags, error) {
	fs := flag.NewFlagSet("bench-server", flag.ContinueOnError)
	var f serverFlags
	f.register(fs)
	args := []string{
		"--id", id, "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--data", dir,
		"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--log-level", "error",
	}
	if len(join) == 0 {
		args = append(args, "--bootstrap")
	} else {
		args = append(args, "--join", strings.Join(join, ","))
	}
	args = append(args, strings.Fields(os.Getenv("WORKRON_BENCH_NODE_ARGS"))...)
	if err := fs.Parse(args); err != nil {
		return f, fmt.Errorf("bench node flags: %w", err)
	}
	return f, nil
}

// stop shuts the nodes down one by one, the current leader first (it hands
// leadership on), and removes their data.
func (c *benchCluster) stop() {
	left := slices.Clone(c.servers)
	for len(left) > 0 {
		i := max(slices.IndexFunc(left, func(s *runningServer) bool { return s.node.IsLeader() }), 0)
		_ = left[i].shutdown()
		left = slices.Delete(left, i, i+1)
	}
	os.RemoveAll(c.dir)
}

// waitUntil polls cond every 50ms until it holds or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// bencher holds what every scenario uses.
type bencher struct {
	f      benchFlags
	hc     *http.Client
	nodes  []string
	runID  string
	stderr io.Writer

	// profile is --cpuprofile; with a single scenario, profileOnly names
	// the one phase that writes it.
	profile, profileOnly string
	profiling            *os.File

	errMu    sync.Mutex
	errShown int
}

func newBencher(f benchFlags, stderr io.Writer) *bencher {
	conns := f.clients*2 + 32
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4 * conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	b := &bencher{
		f:       f,
		hc:      &http.Client{Transport: tr},
		runID:   strconv.FormatInt(time.Now().UnixMilli()%1e9, 36),
		stderr:  stderr,
		profile: f.cpuprofile,
	}
	if sc := splitList(f.scenarios); len(sc) == 1 {
		b.profileOnly = sc[0]
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

// call sends one request and decodes a 2xx JSON reply into out. A non-nil
// error is a transport failure or an unreadable reply.
func (b *bencher) call(ctx context.Context, method, u string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var e wire.Error
		_ = json.Unmarshal(data, &e)
		return resp.StatusCode, fmt.Errorf("%s %s: %s (%s)", method, u, e.Error, e.Code)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode reply of %s %s: %w", method, u, err)
		}
	}
	return resp.StatusCode, nil
}

// do is call that retries while the reply says nothing was done (no
// leader, shedding load) for up to benchRetryFor, counting each retry in
// errs (if not nil).
func (b *bencher) do(ctx context.Context, method, u string, body []byte, out any, errs *atomic.Int64) (int, error) {
	deadline := time.Now().Add(benchRetryFor)
	pause := 10 * time.Millisecond
	for {
		st, err := b.call(ctx, method, u, body, out)
		if classify(st, err) != outRetry || time.Now().After(deadline) || ctx.Err() != nil {
			return st, err
		}
		if errs != nil {
			errs.Add(1)
		}
		b.noteError("retrying", st, err)
		sleepCtx(ctx, pause)
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// outcome sorts a reply by what the caller may conclude.
type outcome int

const (
	outOK       outcome = iota // 2xx
	outRetry                   // 429 or 503: nothing was done
	outUnknown                 // transport failure, 5xx: may have been done
	outRejected                // other 4xx
)

func classify(status int, err error) outcome {
	switch {
	case status/100 == 2 && err == nil:
		return outOK
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return outRetry
	case status >= 400 && status < 500:
		return outRejected
	}
	return outUnknown
}

// healthy reports whether every node answers /health with the same leader
// and that leader's /cluster lists every node with its HTTP address.
func (b *bencher) healthy(ctx context.Context, urls []string) bool {
	leader := ""
	for _, u := range urls {
		var h wire.Health
		if st, err := b.call(ctx, http.MethodGet, u+"/health", nil, &h); err != nil || st != http.StatusOK {
			return false
		}
		if leader != "" && h.Leader != leader {
			return false
		}
		leader = h.Leader
	}
	var c wire.Cluster
	if _, err := b.call(ctx, http.MethodGet, urls[0]+"/cluster", nil, &c); err != nil || len(c.Nodes) != len(urls) {
		return false
	}
	for _, n := range c.Nodes {
		if n.HTTP == "" {
			return false
		}
	}
	return true
}

// roles finds the leader (through /health) and the followers' URLs,
// waiting up to benchRetryFor for an election to end.
func (b *bencher) roles(ctx context.Context) (leader string, followers []string, err error) {
	werr := waitUntil(ctx, benchRetryFor, func() bool {
		leader, followers, err = b.rolesOnce(ctx)
		return err == nil
	})
	if err == nil {
		err = werr
	}
	return leader, followers, err
}

func (b *bencher) rolesOnce(ctx context.Context) (leader string, followers []string, err error) {
	for _, u := range b.nodes {
		var h wire.Health
		if _, err = b.call(ctx, http.MethodGet, u+"/health", nil, &h); err != nil {
			continue
		}
		var c wire.Cluster
		if _, err = b.call(ctx, http.MethodGet, u+"/cluster", nil, &c); err != nil {
			continue
		}
		followers = nil
		for _, n := range c.Nodes {
			if n.ID == h.Leader {
				leader = strings.TrimRight(n.HTTP, "/")
			} else if n.HTTP != "" {
				followers = append(followers, strings.TrimRight(n.HTTP, "/"))
			}
		}
		if leader != "" {
			return leader, followers, nil
		}
		err = fmt.Errorf("node %s knows no leader address", u)
	}
	return "", nil, fmt.Errorf("find the leader: %w", err)
}

// raftCounters reads the leader's proposer counters and term from
// /metrics: entries, commands and term (zeros if unreadable).
func (b *bencher) raftCounters(ctx context.Context, leader string) [3]float64 {
	var out [3]float64
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, leader+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	names := []string{"workron_raft_entries_proposed_total", "workron_raft_commands_proposed_total", "workron_raft_term"}
	for line := range strings.Lines(string(data)) {
		name, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		if i := slices.Index(names, name); i >= 0 {
			out[i], _ = strconv.ParseFloat(val, 64)
		}
	}
	return out
}

// phase measures one timed phase: wall time, CPU time, the leader's Raft
// entries, commands and term, and (with --cpuprofile) a CPU profile.
type phase struct {
	b      *bencher
	leader string
	start  time.Time
	cpu    time.Duration
	raft   [3]float64
}

func (b *bencher) startPhase(ctx context.Context, name, leader string) *phase {
	p := &phase{b: b, leader: leader, raft: b.raftCounters(ctx, leader)}
	if err := b.startProfile(name); err != nil {
		b.progress("bench: cpu profile: %v", err)
	}
	p.start, p.cpu = time.Now(), cpuTime()
	return p
}

// end stops the phase at t (zero: now), fills the figure's timing and
// counters, and returns the phase's length.
func (p *phase) end(ctx context.Context, t time.Time, fg *figure) time.Duration {
	if t.IsZero() {
		t = time.Now()
	}
	p.b.stopProfile()
	fg.CPUCores = (cpuTime() - p.cpu).Seconds() / time.Since(p.start).Seconds()
	fg.Load1 = loadAverage()
	r := p.b.raftCounters(ctx, p.leader)
	fg.Entries, fg.Elections = r[0]-p.raft[0], r[2]-p.raft[2]
	if fg.Entries > 0 {
		fg.CmdsPerEntry = (r[1] - p.raft[1]) / fg.Entries
	}
	d := t.Sub(p.start)
	fg.Seconds = d.Seconds()
	return d
}

// cpuTime is the CPU time this process has used: with an in-process
// cluster, the servers' and the bench's together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the host's one-minute load average (0 where unknown): a
// busy host makes every figure here worse.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(data), " ")
	v, _ := strconv.ParseFloat(first, 64)
	return v
}

// startProfile starts --cpuprofile for a phase: FILE when one scenario
// runs, FILE.PHASE when several do.
func (b *bencher) startProfile(name string) error {
	path := b.profile
	switch {
	case path == "" || b.profileOnly != "" && name != b.profileOnly:
		return nil
	case b.profileOnly == "":
		path += "." + name
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	b.profiling = f
	return nil
}

func (b *bencher) stopProfile() {
	if b.profiling != nil {
		pprof.StopCPUProfile()
		b.profiling.Close()
		b.profiling = nil
	}
}

// jobRef is the part of a job the bench reads from most replies.
type jobRef struct {
	ID       string `json:"id"`
	Attempts int    `json:"attempts"`
	Lease    uint64 `json:"lease"`
}

// tracker keeps, per job, what the bench saw happen to it, so every
// scenario can check that each attempt was claimed once and each job
// reported done exactly once.
type tracker struct {
	mu      sync.Mutex
	jobs    map[string]*jobRec
	order   []string // submitted ids, in the order the replies came
	unknown int      // submissions whose outcome is unknown
	dupes   []string // ids that two submit replies named
}

type jobRec struct {
	submitted bool
	submitAt  time.Time // when the submit request was sent
	claims    []claimRec
	dones     int
	doneLease uint64
}

type claimRec struct {
	attempt int
	lease   uint64
	at      time.Time // when the claim reply arrived
}

func newTracker() *tracker { return &tracker{jobs: make(map[string]*jobRec)} }

func (t *tracker) recLocked(id string) *jobRec {
	r := t.jobs[id]
	if r == nil {
		r = &jobRec{}
		t.jobs[id] = r
	}
	return r
}

func (t *tracker) submitted(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.recLocked(id)
	if r.submitted {
		t.dupes = append(t.dupes, id)
		return
	}
	r.submitted, r.submitAt = true, at
	t.order = append(t.order, id)
}

func (t *tracker) submitUnknown(jobs int) {
	t.mu.Lock()
	t.unknown += jobs
	t.mu.Unlock()
}

func (t *tracker) claimed(id string, attempt int, lease uint64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.recLocked(id)
	r.claims = append(r.claims, claimRec{attempt: attempt, lease: lease, at: at})
}

func (t *tracker) done(id string, lease uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.recLocked(id)
	r.dones++
	r.doneLease = lease
}

// accepted is how many submissions the server confirmed.
func (t *tracker) accepted() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.order)
}

// check lists what the bench saw go wrong: a job claimed twice for one
// attempt or one lease, a job done other than once (when wantDone), a job
// claimed at all (when not), or a claimed job nobody submitted.
func (t *tracker) check(wantDone bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, id := range t.dupes {
		out = append(out, fmt.Sprintf("two submits were answered with job %s", id))
	}
	strays := 0
	for id, r := range t.jobs {
		if !r.submitted {
			strays++
			if strays > t.unknown {
				out = append(out, fmt.Sprintf("job %s was claimed but never submitted by this scenario", id))
			}
		}
		seen := map[int]bool{}
		leases := map[uint64]bool{}
		for _, c := range r.claims {
			if seen[c.attempt] || leases[c.lease] {
				out = append(out, fmt.Sprintf("job %s: attempt %d (lease %d) claimed twice", id, c.attempt, c.lease))
			}
			seen[c.attempt], leases[c.lease] = true, true
		}
		switch {
		case !wantDone && len(r.claims) > 0:
			out = append(out, fmt.Sprintf("job %s was claimed from a queue nobody serves", id))
		case wantDone && r.submitted && r.dones != 1:
			out = append(out, fmt.Sprintf("job %s reported done %d times, want 1", id, r.dones))
		}
	}
	slices.Sort(out)
	return out
}

// verifyQueue checks the leader's state against the tracker: the queue
// holds every accepted job, in status, and no others (beyond submissions
// with an unknown outcome); a sample read one by one agrees in detail.
func (b *bencher) verifyQueue(ctx context.Context, leader, queue, status string, t *tracker) []string {
	t.mu.Lock()
	ids := slices.Clone(t.order)
	unknown := t.unknown
	t.mu.Unlock()
	var out []string
	var qs struct {
		Queues []struct {
			Name   string         `json:"name"`
			Counts map[string]int `json:"counts"`
		} `json:"queues"`
	}
	if _, err := b.do(ctx, http.MethodGet, leader+"/queues", nil, &qs, nil); err != nil {
		return []string{"read /queues: " + err.Error()}
	}
	counts := map[string]int{}
	for _, q := range qs.Queues {
		if q.Name == queue {
			counts = q.Counts
		}
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if counts[status] < len(ids) || total > len(ids)+unknown || total != counts[status] {
		out = append(out, fmt.Sprintf("queue holds %v, want %d %s", counts, len(ids), status))
	}
	out = append(out, b.verifyListing(ctx, leader, queue, status, ids)...)
	return append(out, b.verifySample(ctx, leader, status, ids, t)...)
}

// verifyListing pages GET /jobs?status=&queue= until every id was seen.
func (b *bencher) verifyListing(ctx context.Context, leader, queue, status string, ids []string) []string {
	missing := make(map[string]bool, len(ids))
	for _, id := range ids {
		missing[id] = true
	}
	q := url.Values{"status": {status}, "queue": {queue}, "limit": {"1000"}}
	for len(missing) > 0 {
		var page struct {
			Jobs       []jobRef `json:"jobs"`
			NextCursor string   `json:"next_cursor"`
		}
		if _, err := b.do(ctx, http.MethodGet, leader+"/jobs?"+q.Encode(), nil, &page, nil); err != nil {
			return []string{"list jobs: " + err.Error()}
		}
		for _, j := range page.Jobs {
			delete(missing, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	var out []string
	for id := range missing {
		out = append(out, fmt.Sprintf("job %s is not listed as %s", id, status))
	}
	slices.Sort(out)
	return out
}

// verifySample reads up to benchSampleGets jobs one by one: the status, the
// attempts and, for done jobs, one done attempt under the reported lease.
func (b *bencher) verifySample(ctx context.Context, leader, status string, ids []string, t *tracker) []string {
	var out []string
	step := max(len(ids)/benchSampleGets, 1)
	for i := 0; i < len(ids); i += step {
		id := ids[i]
		var j wire.Job
		if _, err := b.do(ctx, http.MethodGet, leader+"/jobs/"+id, nil, &j, nil); err != nil {
			out = append(out, fmt.Sprintf("get job %s: %v", id, err))
			continue
		}
		t.mu.Lock()
		r := *t.jobs[id]
		t.mu.Unlock()
		if j.Status != status || j.Attempts != len(r.claims) {
			out = append(out, fmt.Sprintf("job %s is %s after %d attempts, want %s after %d", id, j.Status, j.Attempts, status, len(r.claims)))
		}
		if status != wire.StatusDone {
			continue
		}
		dones := 0
		for _, a := range j.AttemptHistory {
			if a.Status == wire.StatusDone {
				dones++
				if a.Lease != r.doneLease {
					out = append(out, fmt.Sprintf("job %s: done under lease %d, the bench reported lease %d", id, a.Lease, r.doneLease))
				}
			}
		}
		if dones != 1 {
			out = append(out, fmt.Sprintf("job %s has %d done attempts in its history, want 1", id, dones))
		}
	}
	return out
}

// submit sends one submit request (POST /jobs, or /jobs/batch when size
// > 1) and records the jobs. It does not retry a request whose outcome is
// unknown (that needs idempotency keys, which would change what is measured);
// the checks allow for such jobs.
func (b *bencher) submit(ctx context.Context, target string, body []byte, size int, t *tracker, errs *atomic.Int64) {
	u := target + "/jobs"
	if size > 1 {
		u += "/batch"
	}
	start := time.Now()
	var reply struct {
		jobRef          // POST /jobs
		Jobs   []jobRef `json:"jobs"` // POST /jobs/batch
	}
	st, err := b.do(ctx, http.MethodPost, u, body, &reply, errs)
	switch o := classify(st, err); {
	case o == outOK && size == 1:
		t.submitted(reply.ID, start)
		return
	case o == outOK:
		for _, j := range reply.Jobs {
			t.submitted(j.ID, start)
		}
		return
	case o == outUnknown && ctx.Err() == nil:
		t.submitUnknown(size)
	}
	errs.Add(1)
	b.noteError("submit", st, err)
}

// submitMany has clients clients submit n jobs (or submit until the
// deadline, if set) to target, per jobs to a request.
func (b *bencher) submitMany(ctx context.Context, target, queue string, n, per, clients int, deadline time.Time, t *tracker, errs *atomic.Int64) {
	jobs := make([]wire.SubmitRequest, per)
	for i := range jobs {
		jobs[i] = wire.SubmitRequest{Command: "true", Queue: queue}
	}
	single := mustJSON(jobs[0])
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				size := per
				if deadline.IsZero() {
					from := int(next.Add(int64(per))) - per
					if from >= n {
						return
					}
					size = min(per, n-from)
				} else if time.Now().After(deadline) {
					return
				}
				body := single
				if size > 1 {
					body = mustJSON(wire.BatchSubmitRequest{Jobs: jobs[:size]})
				}
				b.submit(ctx, target, body, size, t, errs)
			}
		})
	}
	wg.Wait()
}

func (b *bencher) submitSingle(ctx context.Context) ([]figure, error) {
	leader, followers, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	figs := []figure{b.submitLoad(ctx, "submit_single", leader, leader, "leader", b.f.jobs, 1, b.f.clients)}
	if len(followers) > 0 {
		figs = append(figs, b.submitLoad(ctx, "submit_single_follower", leader, followers[0], "follower", max(b.f.jobs/4, 1), 1, b.f.clients))
	}
	return figs, nil
}

func (b *bencher) submitBatch(ctx context.Context) ([]figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	return []figure{b.submitLoad(ctx, "submit_batch", leader, leader, "leader", 2*b.f.jobs, benchBatchSize, benchBatchClients)}, nil
}

// submitLoad measures clients clients submitting n jobs (or for
// --submit-for) to target, per jobs to a request, into a queue nobody serves.
func (b *bencher) submitLoad(ctx context.Context, name, leader, target, role string, n, per, clients int) figure {
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	var deadline time.Time
	ph := b.startPhase(ctx, name, leader)
	if b.f.submitFor > 0 {
		deadline = ph.start.Add(b.f.submitFor)
	}
	b.submitMany(ctx, target, queue, n, per, clients, deadline, t, &errs)
	fg := figure{Figure: name, Unit: "jobs/s", Clients: clients, Target: role}
	d := ph.end(ctx, time.Time{}, &fg)
	fg.Jobs, fg.Errors = t.accepted(), errs.Load()
	fg.Value = float64(fg.Jobs) / d.Seconds()
	fg.Note = "POST /jobs, one job each, keep-alive; the jobs stay pending"
	if per > 1 {
		fg.Note = fmt.Sprintf("POST /jobs/batch, %d jobs each; the jobs stay pending", per)
	}
	fg.check(t.check(false), b.verifyQueue(ctx, leader, queue, wire.StatusPending, t))
	return fg
}

// claimDone pre-submits --jobs jobs, then has --clients virtual workers
// claim up to max at a time (waiting 1s) and report each done, until all are.
func (b *bencher) claimDone(ctx context.Context, name string, claimMax int) ([]figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	n := b.f.jobs
	b.submitMany(ctx, leader, queue, n, benchBatchSize, benchBatchClients, time.Time{}, t, &errs)
	if got := t.accepted(); got != n {
		return nil, fmt.Errorf("pre-submitted %d of %d jobs", got, n)
	}
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second+time.Duration(n)*10*time.Millisecond)
	defer cancel()
	var left atomic.Int64
	var end atomic.Pointer[time.Time]
	left.Store(int64(n))
	onDone := func() {
		if left.Add(-1) == 0 {
			now := time.Now()
			end.Store(&now)
			cancel()
		}
	}
	ph := b.startPhase(ctx, name, leader)
	var wg sync.WaitGroup
	for i := range b.f.clients {
		w := benchWorker{b: b, base: leader, id: fmt.Sprintf("bench-%s-w%d", b.runID, i), queue: queue,
			max: claimMax, wait: "1s", t: t, errs: &errs, onDone: onDone, piggyback: name == "claim_done_piggyback"}
		wg.Go(func() { w.run(runCtx) })
	}
	wg.Wait()
	fg := figure{Figure: name, Unit: "jobs/s", Clients: b.f.clients, Target: "leader", Jobs: n}
	var problems []string
	stop := end.Load()
	if stop == nil {
		problems = append(problems, fmt.Sprintf("timed out with %d of %d jobs not done", left.Load(), n))
		now := time.Now()
		stop = &now
	}
	d := ph.end(ctx, *stop, &fg)
	fg.Value, fg.Errors = float64(n)/d.Seconds(), errs.Load()
	fg.Note = fmt.Sprintf("claim max %d (wait 1s) then POST /jobs/{id}/done per job", claimMax)
	switch {
	case name == "claim_done_piggyback":
		fg.Note = "claim max 1 (wait 1s) carrying the done report of the previous job: one round trip per job"
	case claimMax > 1:
		fg.Note = fmt.Sprintf("claim max %d (wait 1s) then one POST /jobs/reports per claim", claimMax)
	}
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	return []figure{fg}, nil
}

// benchWorker is a virtual worker: it claims from one queue and reports
// every job done at once.
type benchWorker struct {
	b      *bencher
	base   string
	id     string
	queue  string
	max    int
	wait   string
	t      *tracker
	errs   *atomic.Int64
	onDone func() // called once per job reported done
	// piggyback sends each done report with the next claim instead of on
	// its own (one round trip per job).
	piggyback bool
}

func (w *benchWorker) run(ctx context.Context) {
	if w.piggyback {
		w.runPiggyback(ctx)
		return
	}
	body := mustJSON(wire.ClaimRequest{WorkerID: w.id, Queues: []string{w.queue}, Max: w.max, Wait: w.wait})
	for ctx.Err() == nil {
		var reply struct {
			Jobs []jobRef `json:"jobs"`
		}
		st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/claim", body, &reply, w.errs)
		at := time.Now()
		if classify(st, err) != outOK {
			if ctx.Err() != nil {
				return
			}
			w.errs.Add(1)
			w.b.noteError("claim", st, err)
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		for _, j := range reply.Jobs {
			w.t.claimed(j.ID, j.Attempts, j.Lease, at)
		}
		if len(reply.Jobs) == 1 {
			w.report(ctx, reply.Jobs[0].ID, reply.Jobs[0].Lease)
			continue
		}
		w.reportBatch(ctx, reply.Jobs)
	}
}

// runPiggyback claims one job at a time, each claim carrying the done
// report of the job before it; the last report goes on its own.
func (w *benchWorker) runPiggyback(ctx context.Context) {
	var pending []jobRef
	for ctx.Err() == nil {
		// No long-poll: a worker whose claim comes back empty must not hold
		// its last report back for the length of a wait.
		req := wire.ClaimRequest{WorkerID: w.id, Queues: []string{w.queue}, Max: 1, Reports: doneReports(pending)}
		var reply struct {
			Jobs    []jobRef                 `json:"jobs"`
			Reports []wire.BatchReportResult `json:"reports"`
		}
		st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/claim", mustJSON(req), &reply, w.errs)
		at := time.Now()
		if classify(st, err) != outOK || len(reply.Reports) != len(pending) {
			if ctx.Err() != nil {
				break
			}
			w.errs.Add(1)
			w.b.noteError("claim", st, err)
			sleepCtx(ctx, 20*time.Millisecond)
			continue // a repeated report for the same lease is answered like the first
		}
		pending = w.settle(pending, reply.Reports)
		for _, j := range reply.Jobs {
			w.t.claimed(j.ID, j.Attempts, j.Lease, at)
			pending = append(pending, j)
		}
		if len(pending) == 0 {
			sleepCtx(ctx, 5*time.Millisecond) // the queue is empty: poll gently
		}
	}
	if len(pending) > 0 {
		w.reportBatch(context.WithoutCancel(ctx), pending)
	}
}

// reportBatch sends done for several attempts in one POST /jobs/reports,
// retrying the reports whose outcome is not known. A repeated report for
// the same lease is answered like the first, so retries are safe.
func (w *benchWorker) reportBatch(ctx context.Context, jobs []jobRef) {
	left := jobs
	for try := 0; try < 20 && len(left) > 0 && ctx.Err() == nil; try++ {
		req := wire.BatchReportRequest{Reports: doneReports(left)}
		var reply wire.BatchReportResponse
		st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/reports", mustJSON(req), &reply, w.errs)
		if ctx.Err() != nil {
			return
		}
		if classify(st, err) != outOK || len(reply.Results) != len(left) {
			w.errs.Add(1)
			w.b.noteError("report batch", st, err)
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		left = w.settle(left, reply.Results)
	}
}

// doneReports are "done" reports for the attempts of jobs.
func doneReports(jobs []jobRef) []wire.BatchReport {
	out := make([]wire.BatchReport, len(jobs))
	for i, j := range jobs {
		out[i] = wire.BatchReport{JobID: j.ID, Status: wire.StatusDone, ReportRequest: wire.ReportRequest{Lease: j.Lease}}
	}
	return out
}

// settle records the answers to reports sent for the attempts in sent (in
// order) and returns the attempts whose outcome is still unknown.
func (w *benchWorker) settle(sent []jobRef, results []wire.BatchReportResult) []jobRef {
	var retry []jobRef
	for i, r := range results {
		switch {
		case r.Status == wire.StatusDone:
			w.t.done(sent[i].ID, sent[i].Lease)
			w.onDone()
		case wire.RetryReport(r.Code):
			retry = append(retry, sent[i])
		default:
			w.errs.Add(1)
			w.b.noteError("report done", http.StatusConflict, fmt.Errorf("%s: %s", r.Code, r.Error))
		}
	}
	return retry
}

// report sends done for one attempt, retrying while the outcome is not
// known. A 409 after an unknown outcome means the first try took effect;
// the final checks confirm it.
func (w *benchWorker) report(ctx context.Context, id string, lease uint64) {
	body := fmt.Appendf(nil, `{"lease":%d}`, lease)
	unsure := false
	for try := 0; try < 20 && ctx.Err() == nil; try++ {
		st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/"+id+"/done", body, nil, w.errs)
		if ctx.Err() != nil {
			return
		}
		switch classify(st, err) {
		case outOK:
			w.t.done(id, lease)
			w.onDone()
			return
		case outRejected:
			if st == http.StatusConflict && unsure {
				w.t.done(id, lease)
				w.onDone()
				return
			}
			w.errs.Add(1)
			w.b.noteError("report done", st, err)
			return
		case outUnknown:
			unsure = true
		}
		w.errs.Add(1)
		w.b.noteError("report done", st, err)
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// latency submits at --rate for --duration while benchLatencyWorkers
// long-polling workers claim and report done; it measures each job's time
// from the start of its submit request to the arrival of its claim reply.
func (b *bencher) latency(ctx context.Context) ([]figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	const name = "latency"
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	var done atomic.Int64
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var workers sync.WaitGroup
	for i := range benchLatencyWorkers {
		w := benchWorker{b: b, base: leader, id: fmt.Sprintf("bench-%s-lw%d", b.runID, i), queue: queue,
			max: 1, wait: "30s", t: t, errs: &errs, onDone: func() { done.Add(1) }}
		workers.Go(func() { w.run(workCtx) })
	}
	ph := b.startPhase(ctx, name, leader)
	body := mustJSON(wire.SubmitRequest{Command: "true", Queue: queue})
	interval := time.Duration(float64(time.Second) / b.f.rate)
	sem := make(chan struct{}, benchLatencyInflight)
	var subs sync.WaitGroup
	for i := 0; ctx.Err() == nil; i++ {
		due := ph.start.Add(time.Duration(i) * interval)
		if due.Sub(ph.start) >= b.f.duration {
			break
		}
		sleepCtx(ctx, time.Until(due))
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue // the loop ends
		}
		subs.Go(func() {
			defer func() { <-sem }()
			b.submit(ctx, leader, body, 1, t, &errs)
		})
	}
	subs.Wait()
	problems := []string{}
	if err := waitUntil(ctx, 60*time.Second, func() bool { return done.Load() >= int64(t.accepted()) }); err != nil {
		problems = append(problems, fmt.Sprintf("%d of %d jobs done after 60s", done.Load(), t.accepted()))
	}
	cancel()
	workers.Wait()
	fg := figure{Unit: "ms", Clients: benchLatencyWorkers, Target: "leader"}
	ph.end(ctx, time.Time{}, &fg)
	fg.Errors = errs.Load()
	lat := t.latencies()
	fg.Jobs = len(lat)
	fg.Note = fmt.Sprintf("submit→start (submit request sent → claim reply received) at %.0f jobs/s for %s, %d workers long-polling 30s",
		b.f.rate, b.f.duration, benchLatencyWorkers)
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	var figs []figure
	for _, q := range []struct {
		name string
		p    float64
	}{{"latency_p50", 0.50}, {"latency_p99", 0.99}, {"latency_max", 1}} {
		f := fg
		f.Figure, f.Value = q.name, percentile(lat, q.p)
		figs = append(figs, f)
	}
	return figs, nil
}

// latencies are the submit→claim times of the jobs both submitted and
// claimed, in milliseconds, sorted.
func (t *tracker) latencies() []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]float64, 0, len(t.order))
	for _, id := range t.order {
		if r := t.jobs[id]; len(r.claims) > 0 {
			out = append(out, float64(r.claims[0].at.Sub(r.submitAt))/float64(time.Millisecond))
		}
	}
	slices.Sort(out)
	return out
}

// percentile is the nearest-rank p-quantile of sorted values (0 if none).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
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
