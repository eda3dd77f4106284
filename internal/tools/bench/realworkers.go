package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/testkit/proccluster"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// Fixed shape of real_workers.
const (
	benchRealWorkers = 2  // `workron worker` processes
	benchRealSlots   = 16 // --concurrency of each
)

// realWorkers measures how fast real `workron worker` processes run shell
// jobs: first fork_exec_ceiling, how many `sh -c true` this machine starts
// and reaps a second with as many at once as the workers have slots and
// nothing else running; then real_workers, benchRealWorkers worker
// processes with benchRealSlots slots each, started from the workron
// binary against the bench's cluster, running --real-jobs jobs of `true`
// submitted in batches. The clock runs from the first submit until the
// leader's queue counts show every job done.
//
// The workers are opaque, so the checks read what the cluster recorded:
// every job done, in exactly one attempt, with one done attempt in its
// history, and the usual queue, listing and sample checks.
func (b *bencher) realWorkers(ctx context.Context) ([]Figure, error) {
	const name = "real_workers"
	n := b.cfg.RealJobs
	ceiling := b.forkExecCeiling(ctx, n, benchRealWorkers*benchRealSlots)
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	bin, err := b.cfg.binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "workron-bench-workers-")
	if err != nil {
		return nil, fmt.Errorf("worker log dir: %w", err)
	}
	defer os.RemoveAll(dir)
	queue := b.queue(name)
	workers, err := b.startRealWorkers(ctx, bin, dir, queue)
	defer func() {
		for _, w := range workers {
			w.Stop(10 * time.Second)
		}
	}()
	if err != nil {
		return nil, err
	}

	t := newTracker()
	var errs atomic.Int64
	ph := b.startPhase(ctx, name, leader)
	workerCPU := procsCPU(workers)
	b.submitMany(ctx, leader, queue, n, benchBatchSize, benchBatchClients, time.Time{}, t, &errs)
	var problems []string
	end, err := b.waitQueueDone(ctx, leader, queue, t.accepted(), 60*time.Second+time.Duration(n)*20*time.Millisecond, 50*time.Millisecond)
	if err != nil {
		problems = append(problems, err.Error())
	}
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: benchRealWorkers * benchRealSlots, Target: "leader"}
	d := ph.end(ctx, end, &fg)
	workerCores := (procsCPU(workers) - workerCPU).Seconds() / d.Seconds()
	fg.Jobs, fg.Errors = t.accepted(), errs.Load()
	fg.Value = float64(fg.Jobs) / d.Seconds()
	fg.Note = fmt.Sprintf("%d `workron worker` processes × %d slots running `true` (sh -c), jobs submitted in batches of %d; "+
		"the workers and their shells used %.2f cores besides the CPU column (bench + in-process cluster); "+
		"bounded by fork/exec of sh -c (fork_exec_ceiling: %.0f/s alone) plus a claim, a done report and two Raft commits per job",
		benchRealWorkers, benchRealSlots, benchBatchSize, workerCores, ceiling.Value)
	for _, w := range workers {
		if !w.Running() {
			problems = append(problems, fmt.Sprintf("worker %s exited during the run: %s", w.Name, w.Tail(5)))
		}
	}
	problems = append(problems, b.trackFromHistory(ctx, leader, queue, t)...)
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	return []Figure{ceiling, fg}, nil
}

// startRealWorkers starts the worker processes, serving queue through every
// node, and waits until the cluster lists them all.
func (b *bencher) startRealWorkers(ctx context.Context, bin, dir, queue string) ([]*proccluster.Proc, error) {
	var workers []*proccluster.Proc
	ids := map[string]bool{}
	for i := range benchRealWorkers {
		id := fmt.Sprintf("bench-%s-rw%d", b.runID, i)
		ids[id] = true
		w := &proccluster.Proc{Name: id, Bin: bin, Log: filepath.Join(dir, id+".log"),
			Args: []string{"worker", "--server", strings.Join(b.nodes, ","), "--id", id,
				"--concurrency", fmt.Sprint(benchRealSlots), "--queues", queue, "--log-level", "warn"}}
		workers = append(workers, w)
		if _, err := w.Start(); err != nil {
			return workers, err
		}
	}
	err := poll.True(ctx, 30*time.Second, 50*time.Millisecond, func() bool {
		var list wire.WorkerList
		if _, err := b.call(ctx, http.MethodGet, b.nodes[0]+"/workers", nil, &list); err != nil {
			return false
		}
		seen := 0
		for _, w := range list.Workers {
			if ids[w.ID] {
				seen++
			}
		}
		return seen == len(ids)
	})
	if err != nil {
		return workers, fmt.Errorf("wait for %d worker processes to register: %w (log: %s)", len(ids), err, workers[0].Tail(5))
	}
	return workers, nil
}

// procsCPU is the CPU time the processes and their reaped children used.
func procsCPU(ps []*proccluster.Proc) time.Duration {
	var total time.Duration
	for _, p := range ps {
		total += procCPU(p.Pid())
	}
	return total
}

// waitQueueDone polls the leader's queue counts every interval until want
// jobs of queue are done, and returns when it saw that.
func (b *bencher) waitQueueDone(ctx context.Context, leader, queue string, want int, timeout, interval time.Duration) (time.Time, error) {
	done := 0
	err := poll.True(ctx, timeout, interval, func() bool {
		var qs struct {
			Queues []struct {
				Name   string         `json:"name"`
				Counts map[string]int `json:"counts"`
			} `json:"queues"`
		}
		if _, err := b.call(ctx, http.MethodGet, leader+"/queues", nil, &qs); err != nil {
			return false
		}
		for _, q := range qs.Queues {
			if q.Name == queue {
				done = q.Counts[wire.StatusDone]
			}
		}
		return done >= want
	})
	if err != nil {
		return time.Now(), fmt.Errorf("%d of %d jobs done after %s", done, want, timeout)
	}
	return time.Now(), nil
}

// attemptReturned is the status of an attempt in a job's history whose
// claim reply never reached its worker (lost in an election): the cluster
// gave the job back, the attempt did not count and its number is used again
// (store.StatusReturned).
const attemptReturned = "returned"

// trackFromHistory fills the tracker from the jobs of queue the leader
// lists as done, for workers the bench cannot watch: each attempt in a
// job's history as a claim (but a returned one, which no worker received),
// each done attempt as a done report. It returns the jobs that took more
// than one attempt (a `true` job runs once).
func (b *bencher) trackFromHistory(ctx context.Context, leader, queue string, t *tracker) []string {
	var out []string
	q := url.Values{"status": {wire.StatusDone}, "queue": {queue}, "limit": {"1000"}}
	for {
		var page wire.JobList
		if _, err := b.do(ctx, http.MethodGet, leader+"/jobs?"+q.Encode(), nil, &page, nil); err != nil {
			return append(out, "list jobs: "+err.Error())
		}
		for _, j := range page.Jobs {
			if j.Attempts != 1 {
				out = append(out, fmt.Sprintf("job %s ran %d attempts, want 1", j.ID, j.Attempts))
			}
			out = append(out, jobcheck.FinishedOnce(j)...)
			for _, a := range j.AttemptHistory {
				if a.Status == attemptReturned {
					continue
				}
				t.claimed(j.ID, a.Attempt, a.Lease, a.Started)
				if a.Status == wire.StatusDone {
					t.done(j.ID, a.Lease)
				}
			}
		}
		if page.NextCursor == "" {
			return out
		}
		q.Set("cursor", page.NextCursor)
	}
}

// forkExecCeiling runs `sh -c true` n times, par at a time, the way the
// worker runs a job (its own process group, output read from a pipe), and
// reports how many it started and reaped per second.
func (b *bencher) forkExecCeiling(ctx context.Context, n, par int) Figure {
	var next, failed atomic.Int64
	var firstErr atomic.Value
	start, cpu := time.Now(), cpuTime()+childCPUTime()
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if err := runShellTrue(); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	fg := Figure{Figure: "fork_exec_ceiling", Unit: "runs/s", Jobs: n, Seconds: d.Seconds(), Clients: par,
		Errors: failed.Load(), Load1: loadAverage(), Value: float64(n) / d.Seconds(),
		CPUCores: (cpuTime() + childCPUTime() - cpu).Seconds() / d.Seconds()}
	fg.Note = fmt.Sprintf("`sh -c true` %d at a time from one Go process, in its own process group with its output on a pipe, as a worker runs a job; nothing else running: the most shell jobs/s this machine can start", par)
	var problems []string
	if err, _ := firstErr.Load().(error); err != nil {
		problems = append(problems, fmt.Sprintf("%d of %d runs failed, the first: %v", failed.Load(), n, err))
	}
	fg.check(problems)
	return fg
}

// runShellTrue runs `sh -c true` as worker.runShell runs a job.
func runShellTrue() error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd := exec.Command("sh", "-c", "true")
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, pr)
	return cmd.Wait()
}

// childCPUTime is the CPU time this process's reaped children have used.
func childCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
