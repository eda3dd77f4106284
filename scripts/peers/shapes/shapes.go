package shapes

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Scenarios are the scenarios of `workron bench` a peer can run, in
// the order they run.
var Scenarios = []string{"submit_single", "submit_batch", "claim_done", "latency"}

// The fixed shapes of `workron bench` (cmd/workron/bench.go).
const (
	batchSize       = 1000 // jobs per batch insert
	batchClients    = 4    // concurrent batch submitters
	latencyWorkers  = 8    // workers of the latency scenario
	latencyInflight = 64   // most submissions in flight in the latency scenario
	doneTimeout     = 60 * time.Second
)

// Peer is one system under test. Every job carries a sequence number, seq,
// which is all a worker sees of it.
type Peer interface {
	Label() string    // e.g. "River", "asynq (appendfsync always)"
	Settings() string // the durability and tuning settings in force
	// Insert submits one job per seq into queue in one call (a batch insert
	// when there are several); the error says none or not all went in.
	Insert(ctx context.Context, queue string, seqs []int64) error
	CanBatch() bool
	// Work runs workers workers on queue until stop, calling started with
	// each job's seq as its handler begins; the handler then succeeds.
	Work(ctx context.Context, queue string, workers int, started func(seq int64)) (stop func(), err error)
	// Counts reads from the store how many of queue's jobs wait (or run)
	// and how many are done.
	Counts(ctx context.Context, queue string) (waiting, done int, err error)
	Close()
}

// runner runs the scenarios against one peer.
type runner struct {
	f      Flags
	p      Peer
	stderr io.Writer
	runID  string
}

func (r *runner) run(ctx context.Context, name string) ([]Figure, error) {
	switch name {
	case "submit_single":
		return []Figure{r.submit(ctx, name, r.f.Jobs, 1, r.f.Clients)}, nil
	case "submit_batch":
		if !r.p.CanBatch() {
			fmt.Fprintf(r.stderr, "peers-bench: %s has no batch insert; submit_batch skipped\n", r.p.Label())
			return nil, nil
		}
		return []Figure{r.submit(ctx, name, 2*r.f.Jobs, batchSize, batchClients)}, nil
	case "claim_done":
		return r.claimDone(ctx, name)
	case "latency":
		return r.latency(ctx)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// queue names a scenario's own queue.
func (r *runner) queue(scenario string) string {
	return "bench_" + r.runID + "_" + scenario
}

// ledger keeps what happened to each job of a scenario, by seq.
type ledger struct {
	submitAt []time.Time    // written before the seq's insert, by its one submitter
	accepted []atomic.Bool  // the insert returned no error
	starts   []atomic.Int32 // handler starts
	startAt  []atomic.Int64 // first handler start, UnixNano
	total    atomic.Int64   // handler starts, all jobs
	next     atomic.Int64   // next seq to hand out
	errs     atomic.Int64   // failed inserts
	onStart  func(int64)    // called after each start is recorded (may be nil)
	mu       sync.Mutex     // guards firstErr
	firstErr error
}

func newLedger(n int) *ledger {
	return &ledger{submitAt: make([]time.Time, n), accepted: make([]atomic.Bool, n),
		starts: make([]atomic.Int32, n), startAt: make([]atomic.Int64, n)}
}

func (l *ledger) started(seq int64) {
	if seq < 0 || int(seq) >= len(l.starts) {
		return // not ours; check() finds the shortfall
	}
	if l.starts[seq].Add(1) == 1 {
		l.startAt[seq].Store(time.Now().UnixNano())
	}
	total := l.total.Add(1)
	if l.onStart != nil {
		l.onStart(total)
	}
}

func (l *ledger) failed(err error) {
	l.errs.Add(1)
	l.mu.Lock()
	if l.firstErr == nil {
		l.firstErr = err
	}
	l.mu.Unlock()
}

func (l *ledger) acceptedCount() int {
	n := 0
	for i := range l.accepted {
		if l.accepted[i].Load() {
			n++
		}
	}
	return n
}

// check lists what went wrong: an accepted job started other than once
// (when wantRun) or at all (when not).
func (l *ledger) check(wantRun bool) []string {
	var out []string
	bad := 0
	for i := range l.starts {
		n := l.starts[i].Load()
		switch {
		case !wantRun && n > 0:
			bad++
			if bad <= 5 {
				out = append(out, fmt.Sprintf("job %d ran from a queue nobody serves", i))
			}
		case wantRun && l.accepted[i].Load() && n != 1:
			bad++
			if bad <= 5 {
				out = append(out, fmt.Sprintf("job %d started %d times, want 1", i, n))
			}
		}
	}
	if bad > 5 {
		out = append(out, fmt.Sprintf("and %d more", bad-5))
	}
	return out
}

// submitMany has clients clients insert the seqs [0, n), per to a call.
func (r *runner) submitMany(ctx context.Context, queue string, l *ledger, per, clients int) {
	n := len(l.submitAt)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				from := int(l.next.Add(int64(per))) - per
				if from >= n {
					return
				}
				seqs := make([]int64, min(per, n-from))
				for i := range seqs {
					seqs[i] = int64(from + i)
					l.submitAt[from+i] = time.Now()
				}
				r.insert(ctx, queue, l, seqs)
			}
		})
	}
	wg.Wait()
}

func (r *runner) insert(ctx context.Context, queue string, l *ledger, seqs []int64) {
	if err := r.p.Insert(ctx, queue, seqs); err != nil {
		l.failed(err)
		return
	}
	for _, s := range seqs {
		l.accepted[s].Store(true)
	}
}

// submit measures clients clients inserting n jobs, per to a call, into a
// queue nobody serves, then checks the store holds them all, waiting.
func (r *runner) submit(ctx context.Context, name string, n, per, clients int) Figure {
	queue := r.queue(name)
	l := newLedger(n)
	ph := startPhase()
	r.submitMany(ctx, queue, l, per, clients)
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: clients}
	d := ph.end(&fg)
	fg.Jobs, fg.Errors = l.acceptedCount(), l.errs.Load()
	fg.Value = float64(fg.Jobs) / d.Seconds()
	fg.Note = "one job per insert; the jobs stay waiting"
	if per > 1 {
		fg.Note = fmt.Sprintf("batch insert, %d jobs each; the jobs stay waiting", per)
	}
	problems := r.insertProblems(l, n)
	waiting, done, err := r.p.Counts(ctx, queue)
	switch {
	case err != nil:
		problems = append(problems, "read counts: "+err.Error())
	case waiting != fg.Jobs || done != 0:
		problems = append(problems, fmt.Sprintf("store holds %d waiting and %d done, want %d waiting", waiting, done, fg.Jobs))
	}
	fg.check(problems)
	return fg
}

func (r *runner) insertProblems(l *ledger, n int) []string {
	if got := l.acceptedCount(); got != n {
		return []string{fmt.Sprintf("%d of %d inserts failed, the first: %v", n-got, n, l.firstErr)}
	}
	return nil
}

// claimDone inserts --jobs jobs, then has --clients workers run them all;
// the time ends when the store says every job is done.
func (r *runner) claimDone(ctx context.Context, name string) ([]Figure, error) {
	queue := r.queue(name)
	n := r.f.Jobs
	l := newLedger(n)
	per, clients := batchSize, batchClients
	if !r.p.CanBatch() {
		per, clients = 1, r.f.Clients
	}
	r.submitMany(ctx, queue, l, per, clients)
	if got := l.acceptedCount(); got != n {
		return nil, fmt.Errorf("inserted %d of %d jobs, the first error: %w", got, n, l.firstErr)
	}
	all := make(chan struct{})
	l.onStart = func(total int64) {
		if total == int64(n) {
			close(all)
		}
	}
	ph := startPhase()
	stop, err := r.p.Work(ctx, queue, r.f.Clients, l.started)
	if err != nil {
		return nil, err
	}
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: r.f.Clients, Jobs: n}
	problems := r.waitDone(ctx, queue, n, all)
	d := ph.end(&fg)
	stop()
	fg.Value = float64(n) / d.Seconds()
	fg.Note = fmt.Sprintf("%d workers run jobs inserted beforehand; timed until the store has all done", r.f.Clients)
	fg.check(problems, l.check(true))
	return []Figure{fg}, nil
}

// waitDone waits for all (every job started), then polls the store every
// millisecond until it counts n done and none waiting.
func (r *runner) waitDone(ctx context.Context, queue string, n int, all <-chan struct{}) []string {
	ctx, cancel := context.WithTimeout(ctx, doneTimeout)
	defer cancel()
	select {
	case <-all:
	case <-ctx.Done():
		return []string{fmt.Sprintf("not every job started within %s", doneTimeout)}
	}
	for {
		waiting, done, err := r.p.Counts(ctx, queue)
		if err == nil && done >= n && waiting == 0 {
			if done > n {
				return []string{fmt.Sprintf("store counts %d done, want %d", done, n)}
			}
			return nil
		}
		if ctx.Err() != nil {
			return []string{fmt.Sprintf("store counts %d waiting and %d done after %s (err %v), want %d done", waiting, done, doneTimeout, err, n)}
		}
		time.Sleep(time.Millisecond)
	}
}

// latency inserts at --rate for --duration while latencyWorkers workers
// run; it measures each job's time from the start of its insert to the
// start of its handler.
func (r *runner) latency(ctx context.Context) ([]Figure, error) {
	const name = "latency"
	queue := r.queue(name)
	interval := time.Duration(float64(time.Second) / r.f.Rate)
	n := int(r.f.Duration / interval)
	if time.Duration(n)*interval < r.f.Duration {
		n++
	}
	l := newLedger(n)
	all := make(chan struct{})
	var once sync.Once
	var want atomic.Int64
	want.Store(math.MaxInt64)
	l.onStart = func(total int64) {
		if total >= want.Load() {
			once.Do(func() { close(all) })
		}
	}
	stop, err := r.p.Work(ctx, queue, latencyWorkers, l.started)
	if err != nil {
		return nil, err
	}
	defer stop()
	ph := startPhase()
	sem := make(chan struct{}, latencyInflight)
	var subs sync.WaitGroup
	for i := 0; i < n && ctx.Err() == nil; i++ {
		sleepUntil(ctx, ph.start.Add(time.Duration(i)*interval))
		sem <- struct{}{}
		l.submitAt[i] = time.Now()
		subs.Go(func() {
			defer func() { <-sem }()
			r.insert(ctx, queue, l, []int64{int64(i)})
		})
	}
	subs.Wait()
	accepted := l.acceptedCount()
	want.Store(int64(accepted))
	if l.total.Load() >= int64(accepted) {
		once.Do(func() { close(all) })
	}
	problems := append(r.insertProblems(l, n), r.waitDone(ctx, queue, accepted, all)...)
	fg := Figure{Unit: "ms", Clients: latencyWorkers, Errors: l.errs.Load()}
	ph.end(&fg)
	lat := l.latencies()
	fg.Jobs = len(lat)
	fg.Note = fmt.Sprintf("submit→start (insert sent → handler starts) at %.0f jobs/s for %s, %d workers", r.f.Rate, r.f.Duration, latencyWorkers)
	fg.check(problems, l.check(true))
	var figs []Figure
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

// latencies are the insert→start times of the started jobs, in ms, sorted.
func (l *ledger) latencies() []float64 {
	var out []float64
	for i := range l.startAt {
		if at := l.startAt[i].Load(); at != 0 && !l.submitAt[i].IsZero() {
			out = append(out, float64(at-l.submitAt[i].UnixNano())/float64(time.Millisecond))
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

// check records the problems found for the Figure.
func (fg *Figure) check(problems ...[]string) {
	var all []string
	for _, p := range problems {
		all = append(all, p...)
	}
	fg.Correct = len(all) == 0
	for i, p := range all {
		if i > 0 {
			fg.Problems += "; "
		}
		fg.Problems += p
	}
}

// phase times one measured phase: wall time and this process's CPU time
// (the load generator and the client library; the server is another process).
type phase struct {
	start time.Time
	cpu   time.Duration
}

func startPhase() phase { return phase{start: time.Now(), cpu: cpuTime()} }

func (p phase) end(fg *Figure) time.Duration {
	d := time.Since(p.start)
	fg.Seconds = d.Seconds()
	fg.CPUCores = (cpuTime() - p.cpu).Seconds() / d.Seconds()
	fg.Load1 = loadAverage()
	return d
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}
