package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

// benchJobType is the type of the jobs claim_done_worker runs.
const benchJobType = "bench-noop"

// claimDoneWorker measures the default worker path: it pre-submits --jobs
// typed jobs, then runs one Go SDK worker (worker.Worker, what `workron
// worker --concurrency N` runs) in this process with --clients slots and a
// handler that returns nil at once, serving them through every node, the
// leader first. The worker claims up to its free slots and carries the
// reports of the jobs that ended on its next claim. The clock runs from
// the worker's start until the leader counts every job done: once the
// handler has run for every job, the leader's queue counts are read every
// millisecond, as the peers' stores are (scripts/peers).
//
// The worker is not watched from inside, so the checks read what the
// cluster recorded, as real_workers does, and count the handler's runs.
func (b *bencher) claimDoneWorker(ctx context.Context) ([]Figure, error) {
	const name = "claim_done_worker"
	leader, followers, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	if err := b.preSubmit(ctx, leader, wire.SubmitRequest{Type: benchJobType, Queue: queue}, t, &errs); err != nil {
		return nil, err
	}
	n := b.cfg.Jobs
	var runs atomic.Int64
	ran := make(chan struct{}) // closed when the handler has run n times
	w, err := b.newBenchWorker(name, append([]string{leader}, followers...), queue, func(context.Context, *worker.Job) error {
		if runs.Add(1) == int64(n) {
			close(ran)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	timeout := 60*time.Second + time.Duration(n)*10*time.Millisecond
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	ph := b.startPhase(ctx, name, leader)
	var runErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		runErr = w.Run(runCtx)
	}()

	var problems []string
	end := time.Now()
	select {
	case <-ran:
		end, err = b.waitQueueDone(ctx, leader, queue, n, timeout, time.Millisecond)
		if err != nil {
			problems = append(problems, err.Error())
		}
	case <-stopped:
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: b.cfg.Clients, Target: "leader", Jobs: n}
	d := ph.end(ctx, end, &fg)
	stopWorker()
	<-stopped
	if runErr != nil {
		problems = append(problems, fmt.Sprintf("the worker stopped: %v", runErr))
	}
	if got := runs.Load(); got != int64(n) {
		problems = append(problems, fmt.Sprintf("the handler ran %d times for %d jobs", got, n))
	}
	fg.Value, fg.Errors = float64(n)/d.Seconds(), errs.Load()
	fg.Note = fmt.Sprintf("one Go SDK worker (package worker, as `workron worker --concurrency %d`) with %d slots and a typed handler "+
		"returning nil: it claims up to its free slots, carrying the reports of the jobs that ended; "+
		"timed from its start until the leader counts every job done", b.cfg.Clients, b.cfg.Clients)
	problems = append(problems, b.trackFromHistory(ctx, leader, queue, t)...)
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	return []Figure{fg}, nil
}

// newBenchWorker is a Go SDK worker with --clients slots serving queue
// through servers with h for benchJobType jobs only; it logs nothing (the
// SDK's default) unless the nodes' logs are shown (WORKRON_BENCH_LOG).
func (b *bencher) newBenchWorker(name string, servers []string, queue string, h worker.HandlerFunc) (*worker.Worker, error) {
	cfg := worker.DefaultConfig()
	cfg.Servers = servers
	cfg.ID = fmt.Sprintf("bench-%s-%s", b.runID, name)
	cfg.Concurrency = b.cfg.Clients
	cfg.Queues = []string{queue}
	cfg.Shell = false
	if b.cfg.NodeLogs {
		cfg.Logger = slog.New(slog.NewTextHandler(b.stderr, nil))
	}
	w, err := worker.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench worker: %w", err)
	}
	w.Handle(benchJobType, h)
	return w, nil
}
