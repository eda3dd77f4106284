package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// Sentinel errors of package worker.
var (
	// ErrAlreadyRunning is returned by Run while another Run of the same
	// Worker is in progress.
	ErrAlreadyRunning = errors.New("worker: already running")
	// ErrNothingToRun is returned by Run when Shell is false and no handler
	// is registered: the worker could serve no job.
	ErrNothingToRun = errors.New("worker: shell jobs are disabled and no handler is registered")
	// ErrTooManyTypes is returned by Run when more handlers are registered
	// than a claim may name (wire.MaxTypes).
	ErrTooManyTypes = fmt.Errorf("worker: more than %d handler types registered, the most a claim may name", wire.MaxTypes)
	// ErrParked is wrapped by the error of a Job's Sleep, SleepUntil,
	// WaitForEvent, WaitForSignal or Invoke that parked the job: the
	// attempt has ended (uncharged), and the handler returns the error.
	// The worker sends no report for a parked attempt; the job runs again
	// when it wakes, and the handler replays to the parking step.
	ErrParked = errors.New("worker: job parked")
	// ErrTooManyStepNames is wrapped by the error of a step whose name is
	// new past MaxStepNames names in one attempt.
	ErrTooManyStepNames = fmt.Errorf("worker: more than %d step names in one attempt", MaxStepNames)
	// ErrStepOptions is wrapped by the error of StepWith given options out
	// of range (nothing is run).
	ErrStepOptions = errors.New("worker: step options out of range")
	// ErrNotDurable is wrapped by the error of WaitForEvent,
	// WaitForSignal or Invoke on a Job not given by a Worker (a test's),
	// which has no journal.
	ErrNotDurable = errors.New("worker: the job has no journal (not run by a Worker)")
)

// defaultLeaseTTL stands in for the lease TTL until a claim tells it.
const defaultLeaseTTL = 15 * time.Second

// HandlerFunc runs one typed job. A nil error reports the job done; an error
// reports it failed with the error's text (wrap it with NoRetry to make the
// failure final). ctx ends on the job's timeout, when the job is cancelled
// and on hard shutdown; the handler must return soon after, because Run
// waits for it.
type HandlerFunc func(ctx context.Context, job *Job) error

// Job is what a handler sees of a claimed job. Its methods Progress and
// SetResult report how far it is and what it returns (progress.go).
type Job struct {
	ID       string
	Type     string
	Queue    string
	Payload  json.RawMessage
	Attempt  int // 1 on the first run
	Metadata map[string]string
	Env      map[string]string
	// ParentResults are the results of the jobs this one depends on, by
	// id (those that returned none left out); see ParentResult. All of
	// them: when the claim reply carried only some (it is bounded), the
	// worker read the rest before it called the handler.
	ParentResults map[string]json.RawMessage
	// TraceParent is the W3C traceparent of the attempt's run span (the
	// job's trace; "" when it has none). A handler with OpenTelemetry gets
	// the span from its context instead.
	TraceParent string

	progress *progressSlot   // nil: not given by a Worker
	journal  *journal        // nil: not given by a Worker (steps.go)
	result   json.RawMessage // set by SetResult
}

// Worker claims and runs jobs. Create it with New, register handlers with
// Handle, then call Run.
type Worker struct {
	cfg       Config
	log       *slog.Logger
	client    *client.Client
	ownClient bool
	active    atomic.Bool
	leaseTTL  atomic.Int64      // nanoseconds; 0 until a claim tells it
	env       []string          // the worker's variables that commands get
	runAs     *identity         // nil: commands run as the worker's user
	allowed   map[string]string // Config.AllowCommands, resolved; nil: any command
	watch     *watcher          // set while Run runs shell jobs
	tracer    trace.Tracer      // Config.Tracer's, or a no-op one

	mu       sync.Mutex
	handlers map[string]HandlerFunc
	running  map[string]*task // by job id
	reports  *reportQueue

	jobs       sync.WaitGroup
	slotFreed  chan struct{} // cap 1: a task ended
	jobsBegan  chan struct{} // cap 1: a task started
	watchJobs  chan struct{} // cap 1: a task started, for actionsLoop
	progressed chan struct{} // cap 1: a running job made progress
	gather     time.Duration // claimGather; tests change it

	// Claim numbers (wire.ClaimRequest.ClaimSeq) of this run: the first,
	// the last whose request ended (its jobs, if any, started), and the
	// last that failed until a heartbeat has covered it (0: none).
	claimsFrom  uint64
	claimsEnded atomic.Uint64
	claimLost   atomic.Uint64

	progressOff atomic.Int64 // Unix nanoseconds: send no progress until then
}

// New validates cfg and returns a Worker. It builds a client for
// cfg.Servers when cfg.Client is nil. It looks up cfg.RunAs (refusing it
// when the process is not root) and the programs of cfg.AllowCommands, and
// reads the variables of BaseEnv and cfg.PassEnv that commands will get.
func New(cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Queues = slices.Clone(cfg.Queues)
	runAs, err := lookupRunAs(cfg.RunAs, os.Geteuid())
	if err != nil {
		return nil, err
	}
	allowed, err := resolveAllowed(cfg.AllowCommands)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		env:        workerEnv(append(BaseEnv(), cfg.PassEnv...)),
		runAs:      runAs,
		allowed:    allowed,
		cfg:        cfg,
		log:        cfg.Logger.With("component", "worker", "worker_id", cfg.ID),
		client:     cfg.Client,
		handlers:   make(map[string]HandlerFunc),
		running:    make(map[string]*task),
		reports:    newReportQueue(),
		slotFreed:  make(chan struct{}, 1),
		jobsBegan:  make(chan struct{}, 1),
		watchJobs:  make(chan struct{}, 1),
		progressed: make(chan struct{}, 1),
		gather:     claimGather,
		// Above any number an earlier run of this id used, unless the
		// clock went back.
		claimsFrom: uint64(time.Now().UnixNano()),
	}
	tp := cfg.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	w.tracer = tp.Tracer(tracerName)
	if w.client == nil {
		ccfg := client.DefaultConfig()
		ccfg.Servers = cfg.Servers
		ccfg.Logger = cfg.Logger
		c, err := client.New(ccfg)
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		w.client, w.ownClient = c, true
	}
	return w, nil
}

// Handle registers h for jobs of type jobType, replacing any earlier one.
// It may be called before or during Run; claims made after it ask for the
// type. It panics when jobType is empty or h is nil.
func (w *Worker) Handle(jobType string, h HandlerFunc) {
	if jobType == "" || h == nil {
		panic("worker: Handle needs a job type and a handler")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[jobType] = h
}

// Run registers the worker and runs jobs until ctx ends, then shuts down as
// the package doc says and returns nil. Every goroutine it started has ended
// when it returns. It returns ErrAlreadyRunning or ErrNothingToRun without
// doing anything, an error when it cannot start the job watcher (a small
// sh that kills the jobs' process groups when the worker exits, see the
// package doc), and an error wrapping the *client.Error when the server
// refuses the registration for good (400, 401, 403 and the like).
func (w *Worker) Run(ctx context.Context) error {
	if !w.active.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer w.active.Store(false)
	if !w.cfg.Shell && len(w.handlerTypes()) == 0 {
		return ErrNothingToRun
	}
	if len(w.handlerTypes()) > wire.MaxTypes {
		return ErrTooManyTypes
	}
	if w.cfg.Shell {
		wt, err := startWatcher(w.log)
		if err != nil {
			return err
		}
		w.watch = wt
		defer func() { // every job has ended
			wt.stop()
			w.watch = nil
		}()
	}
	if w.ownClient {
		defer w.client.Close()
	}
	if err := w.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	// Jobs, heartbeats and reports outlive ctx during the grace period.
	base := context.WithoutCancel(ctx)
	jobCtx, hardStop := context.WithCancelCause(base)
	defer hardStop(nil)
	hbCtx, stopHeartbeats := context.WithCancel(base)
	var hb sync.WaitGroup
	hb.Go(func() { w.heartbeatLoop(hbCtx) })
	hb.Go(func() { w.actionsLoop(hbCtx) })
	closing := make(chan struct{})
	var reporter sync.WaitGroup
	reporter.Go(func() { w.reportLoop(base, closing) })

	w.claimLoop(ctx, base, jobCtx)
	w.drain(hardStop)
	close(closing)
	reporter.Wait()
	stopHeartbeats()
	hb.Wait()
	w.log.Info("worker stopped")
	return nil
}

// claimLoop claims jobs while there are free slots, until ctx ends. Each
// claim carries the reports still queued, so a busy worker reports and
// claims in one round trip; such a claim does not long-poll, so the
// reports' answers come back at once.
func (w *Worker) claimLoop(ctx, base, jobCtx context.Context) {
	bo := newBackoff(100*time.Millisecond, 5*time.Second)
	gather := time.NewTimer(claimGather) // reset by waitForSlots
	defer gather.Stop()
	gather.Stop()
	// A later Run of the same Worker numbers on: its claims must stay
	// above those a heartbeat names as ended (claimsEnded), or its first
	// heartbeat would name its own claims in flight, and the cluster give
	// their jobs back.
	for seq := max(w.claimsFrom, w.claimsEnded.Load()+1); ; seq++ {
		free, ok := w.waitForSlots(ctx, gather)
		if !ok {
			return
		}
		reps := w.reports.take(wire.MaxBatchReports)
		req := wire.ClaimRequest{
			WorkerID: w.cfg.ID,
			Queues:   w.cfg.Queues,
			Types:    w.handlerTypes(),
			Shell:    w.cfg.Shell,
			Max:      free,
			Wait:     w.cfg.PollWait.String(),
			ClaimSeq: seq,
		}
		if len(reps) > 0 {
			req.Reports, req.Wait = wireReports(reps), "0s"
		}
		began := time.Now()
		resp, err := w.client.Claim(ctx, req)
		w.claimAnswered(reps, resp, err)
		if err == nil {
			w.startAll(base, jobCtx, resp)
		}
		w.claimEnded(seq, err)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.log.Warn("claim failed", "err", err)
			if client.IsNotFound(err) {
				w.reregister(ctx)
			}
			if !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		if len(resp.Jobs) == 0 && len(reps) == 0 && time.Since(began) < minPollWait {
			// The server answered at once with nothing: do not spin.
			if !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		bo.reset()
	}
}

// claimEnded records that claim seq ended, after its jobs started: a
// heartbeat that names it lists them. A claim that failed may have leased
// jobs whose reply was lost; the heartbeats then go on, even while idle,
// until one has named it, so that the cluster gives those jobs back.
func (w *Worker) claimEnded(seq uint64, err error) {
	w.claimsEnded.Store(seq)
	if err != nil {
		w.claimLost.Store(seq)
		signal(w.jobsBegan)
	}
}

// claimAnswered settles the reports a claim carried, or queues them again
// for the reporter when the claim got no answer for them.
func (w *Worker) claimAnswered(reps []*pendingReport, resp *wire.ClaimResponse, err error) {
	if len(reps) == 0 {
		return
	}
	if err != nil || len(resp.Reports) != len(reps) {
		w.reports.putBack(reps, w.currentLeaseTTL())
		return
	}
	w.settleReports(reps, resp.Reports)
}

func (w *Worker) startAll(base, jobCtx context.Context, resp *wire.ClaimResponse) {
	if resp.LeaseTTLMillis > 0 {
		w.leaseTTL.Store(int64(time.Duration(resp.LeaseTTLMillis) * time.Millisecond))
	}
	for _, j := range resp.Jobs {
		w.start(base, jobCtx, j)
	}
}

// claimGather is how long the claim loop waits, once a slot is free while
// other jobs run, for more slots to free before it claims: jobs that end
// together (short handlers, the jobs of one claim) then share one claim,
// which carries their reports, instead of a claim for the first to end and
// another round trip for the rest. It delays a claim by at most this much
// when jobs end one by one.
const claimGather = time.Millisecond

// waitForSlots blocks until at least one slot is free and returns how many
// are, or false when ctx ends. While jobs run, it returns when every slot
// is free or w.gather after it first saw one free. gather is the claim
// loop's timer, stopped or expired.
func (w *Worker) waitForSlots(ctx context.Context, gather *time.Timer) (int, bool) {
	var gathered <-chan time.Time
	for {
		free := w.freeSlots()
		switch {
		case free == w.cfg.Concurrency:
			return free, ctx.Err() == nil
		case free > 0 && gathered == nil:
			gather.Reset(w.gather)
			gathered = gather.C
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-w.slotFreed:
		case <-gathered:
			return w.freeSlots(), ctx.Err() == nil
		}
	}
}

// freeSlots is how many more jobs may run now.
func (w *Worker) freeSlots() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cfg.Concurrency - len(w.running)
}

// drain waits up to Grace for running jobs, then stops the rest and waits
// for them and their reports.
func (w *Worker) drain(hardStop context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() {
		w.jobs.Wait()
		close(done)
	}()
	if n := w.runningCount(); n > 0 {
		w.log.Info("shutting down: waiting for running jobs", "jobs", n, "grace", w.cfg.Grace)
	}
	grace := time.NewTimer(w.cfg.Grace)
	defer grace.Stop()
	select {
	case <-done:
		return
	case <-grace.C:
	}
	w.log.Warn("grace period over: stopping running jobs", "jobs", w.runningCount())
	hardStop(errShutdown)
	<-done
}

// register announces the worker until it succeeds, ctx ends or the server
// refuses it for good.
func (w *Worker) register(ctx context.Context) error {
	bo := newBackoff(100*time.Millisecond, 5*time.Second)
	info := wire.Worker{
		ID:        w.cfg.ID,
		ExecAddr:  w.cfg.ExecAddr,
		Resources: w.cfg.Resources,
		Tags:      w.cfg.Tags,
		Queues:    w.cfg.Queues,
	}
	for {
		err := w.client.Register(ctx, info)
		if err == nil {
			w.log.Info("registered", "server", w.client.Server(), "queues", w.cfg.Queues)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if permanent(err) {
			return fmt.Errorf("worker: %w", err)
		}
		w.log.Warn("register failed, retrying", "err", err)
		if !sleep(ctx, bo.next()) {
			return ctx.Err()
		}
	}
}

// reregister registers again after the server forgot the worker, logging
// rather than returning a failure.
func (w *Worker) reregister(ctx context.Context) {
	w.log.Warn("server does not know this worker: registering again")
	if err := w.register(ctx); err != nil && ctx.Err() == nil {
		w.log.Error("register again failed", "err", err)
	}
}

func (w *Worker) handlerTypes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	types := make([]string, 0, len(w.handlers))
	for t := range w.handlers {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

func (w *Worker) handler(jobType string) HandlerFunc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handlers[jobType]
}

// busy reports whether the worker holds any lease: a job runs, or its
// report has not been answered yet.
func (w *Worker) busy() bool {
	return w.runningCount() > 0 || len(w.reports.leases()) > 0 || w.claimLost.Load() != 0
}

func (w *Worker) runningCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// currentLeaseTTL returns the lease TTL the server announced, or a default.
func (w *Worker) currentLeaseTTL() time.Duration {
	if d := time.Duration(w.leaseTTL.Load()); d > 0 {
		return d
	}
	return defaultLeaseTTL
}

// permanent reports whether a registration error will not go away by
// retrying: a 4xx other than 404, 408 and 429.
func permanent(err error) bool {
	s := client.StatusOf(err)
	return s >= 400 && s < 500 && s != http.StatusNotFound &&
		s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
}
