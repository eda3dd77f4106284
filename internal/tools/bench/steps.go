package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
	"github.com/workron/workron/worker/client"
)

// Durable steps (issue #31): step_record, step_jobs and step_resume run a
// Go SDK worker (package worker) whose handlers call job.Step, against the
// cluster's journal routes (PUT /jobs/{id}/steps/{key} and the reads).

// Shapes of the step scenarios.
const (
	benchStepType       = "bench-steps" // type of the step scenarios' jobs
	benchStepStreams    = 8             // attempts recording at once in step_record
	benchStepsPerJob    = 10            // steps of each job of step_jobs
	benchResumeRounds   = 3             // resumes timed per journal in step_resume
	benchResumeFillers  = 32            // concurrent PUTs filling a journal
	benchResumeMaxSteps = 10_000        // the cluster's max_steps_per_job (fsm.MaxStepsPerJob)
)

// stepWorker is a Go SDK worker with slots slots for benchStepType jobs on
// queue, whose HTTP requests to the journal routes are counted.
func (b *bencher) stepWorker(name string, servers []string, queue string, slots int, h worker.HandlerFunc) (*worker.Worker, *reqCounter, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	rc := &reqCounter{next: tr}
	ccfg := client.DefaultConfig()
	ccfg.Servers, ccfg.HTTPClient = servers, &http.Client{Transport: rc, Timeout: 30 * time.Second}
	c, err := client.New(ccfg)
	if err != nil {
		return nil, nil, fmt.Errorf("bench worker client: %w", err)
	}
	rc.close = func() { c.Close(); tr.CloseIdleConnections() }
	cfg := worker.DefaultConfig()
	cfg.Client = c
	cfg.ID = fmt.Sprintf("bench-%s-%s", b.runID, name)
	cfg.Concurrency = slots
	cfg.Queues = []string{queue}
	cfg.Shell = false
	if b.cfg.NodeLogs {
		cfg.Logger = slog.New(slog.NewTextHandler(b.stderr, nil))
	}
	w, err := worker.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("bench worker: %w", err)
	}
	w.Handle(benchStepType, h)
	return w, rc, nil
}

// reqCounter counts the requests to the journal routes that pass through
// it: step reads (GET /jobs/{id}/steps/{key}), journal pages (GET
// /jobs/{id}/steps) and records (PUT).
type reqCounter struct {
	next                http.RoundTripper
	close               func() // closes the worker's client when its run is over
	reads, pages, puts  atomic.Int64
	readsNotFound, more atomic.Int64
}

func (c *reqCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	p := r.URL.Path
	_, key, isStep := strings.Cut(p, "/steps")
	switch {
	case !isStep || !strings.HasPrefix(p, "/jobs/"):
		c.more.Add(1)
	case r.Method == http.MethodPut:
		c.puts.Add(1)
	case r.Method == http.MethodGet && key == "":
		c.pages.Add(1)
	case r.Method == http.MethodGet:
		c.reads.Add(1)
		if err == nil && resp.StatusCode == http.StatusNotFound {
			c.readsNotFound.Add(1)
		}
	}
	return resp, err
}

// runStepWorker runs w until done is closed (or timeout), and returns the
// problems: a worker that stopped early, a timeout.
func runStepWorker(ctx context.Context, w *worker.Worker, done <-chan struct{}, timeout time.Duration) []string {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var runErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		runErr = w.Run(runCtx)
	}()
	var problems []string
	select {
	case <-done:
	case <-stopped:
		problems = append(problems, "the worker stopped before its jobs ended")
	case <-time.After(timeout):
		problems = append(problems, fmt.Sprintf("timed out after %s", timeout))
	case <-ctx.Done():
		problems = append(problems, ctx.Err().Error())
	}
	stop()
	<-stopped
	if runErr != nil {
		problems = append(problems, fmt.Sprintf("the worker stopped: %v", runErr))
	}
	return problems
}

// stepRecord measures one step record as a handler sees it: the time of a
// job.Step call whose function returns at once, which is one PUT
// /jobs/{id}/steps/{key} committed through Raft. benchStepStreams jobs run
// at once, each recording --jobs/benchStepStreams steps one after the
// other (at most max_steps_per_job).
func (b *bencher) stepRecord(ctx context.Context) ([]Figure, error) {
	const name = "step_record"
	leader, followers, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	queue := b.queue(name)
	per := min(max(b.cfg.Jobs/benchStepStreams, 1), benchResumeMaxSteps)
	t := newTracker()
	var errs atomic.Int64
	b.submitJobs(ctx, leader, wire.SubmitRequest{Type: benchStepType, Queue: queue}, benchStepStreams, 1, 1, time.Time{}, t, &errs)
	if got := t.accepted(); got != benchStepStreams {
		return nil, fmt.Errorf("submitted %d of %d jobs", got, benchStepStreams)
	}
	var (
		mu      sync.Mutex
		lat     []float64
		ran     atomic.Int64
		handled atomic.Int64
		bad     []string
	)
	allDone := make(chan struct{})
	w, rc, err := b.stepWorker(name, append([]string{leader}, followers...), queue, benchStepStreams, func(ctx context.Context, job *worker.Job) error {
		mine := make([]float64, 0, per)
		var err error
		for i := range per {
			began := time.Now()
			var got json.RawMessage
			got, err = job.Step(ctx, "s", func(context.Context) (any, error) {
				ran.Add(1)
				return i, nil
			})
			mine = append(mine, float64(time.Since(began))/float64(time.Millisecond))
			if err == nil && string(got) != strconv.Itoa(i) {
				err = fmt.Errorf("step %d of job %s returned %s", i+1, job.ID, got)
			}
			if err != nil {
				break
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		if err != nil {
			bad = append(bad, err.Error())
		}
		mu.Unlock()
		if handled.Add(1) == benchStepStreams {
			close(allDone)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	defer rc.close()
	ph := b.startPhase(ctx, name, leader)
	problems := runStepWorker(ctx, w, allDone, 60*time.Second+time.Duration(per)*50*time.Millisecond)
	fg := Figure{Unit: "ms", Clients: benchStepStreams, Target: "leader", Jobs: benchStepStreams * per}
	ph.end(ctx, time.Time{}, &fg)
	if _, err := b.waitQueueDone(ctx, leader, queue, benchStepStreams, 30*time.Second, 5*time.Millisecond); err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, bad...)
	if got, want := ran.Load(), int64(benchStepStreams*per); got != want {
		problems = append(problems, fmt.Sprintf("the step functions ran %d times for %d steps", got, want))
	}
	if got, want := rc.puts.Load(), int64(benchStepStreams*per); got != want {
		problems = append(problems, fmt.Sprintf("%d step records sent for %d steps", got, want))
	}
	if n := rc.reads.Load() + rc.pages.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d journal reads for jobs with no recorded step", n))
	}
	problems = append(problems, b.checkJournals(ctx, leader, t, per)...)
	problems = append(problems, b.trackFromHistory(ctx, leader, queue, t)...)
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	fg.Note = fmt.Sprintf("job.Step with a function returning at once (one PUT /jobs/{id}/steps/{key}, committed through Raft): "+
		"%d attempts at once on one Go SDK worker, %d steps each in sequence; records per second %.0f",
		benchStepStreams, per, float64(benchStepStreams*per)/fg.Seconds)
	slices.Sort(lat)
	var figs []Figure
	for _, q := range []struct {
		name string
		p    float64
	}{{"step_record_p50", 0.50}, {"step_record_p99", 0.99}, {"step_record_max", 1}} {
		f := fg
		f.Figure, f.Value = q.name, percentile(lat, q.p)
		figs = append(figs, f)
	}
	return figs, nil
}

// checkJournals reads each job of t (all of them up to benchSampleGets,
// a sample beyond) and checks its journal holds want steps.
func (b *bencher) checkJournals(ctx context.Context, leader string, t *tracker, want int) []string {
	t.mu.Lock()
	ids := slices.Clone(t.order)
	t.mu.Unlock()
	var out []string
	step := max(len(ids)/benchSampleGets, 1)
	for i := 0; i < len(ids); i += step {
		var j wire.Job
		if _, err := b.do(ctx, http.MethodGet, leader+"/jobs/"+ids[i], nil, &j, nil); err != nil {
			out = append(out, fmt.Sprintf("get job %s: %v", ids[i], err))
			continue
		}
		if j.Journal == nil || j.Journal.Count != want {
			got := 0
			if j.Journal != nil {
				got = j.Journal.Count
			}
			out = append(out, fmt.Sprintf("job %s: %d steps recorded, want %d", ids[i], got, want))
		}
	}
	return out
}

// stepJobs measures jobs made of benchStepsPerJob steps: --jobs/10 jobs run
// by one Go SDK worker with --clients slots whose handler calls job.Step
// ten times (each a function returning at once), from the worker's start
// until the leader counts every job done.
func (b *bencher) stepJobs(ctx context.Context) ([]Figure, error) {
	const name = "step_jobs"
	leader, followers, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	queue := b.queue(name)
	n := max(b.cfg.Jobs/benchStepsPerJob, 1)
	t := newTracker()
	var errs atomic.Int64
	b.submitJobs(ctx, leader, wire.SubmitRequest{Type: benchStepType, Queue: queue}, n, benchBatchSize, benchBatchClients, time.Time{}, t, &errs)
	if got := t.accepted(); got != n {
		return nil, fmt.Errorf("pre-submitted %d of %d jobs", got, n)
	}
	var ran, handled atomic.Int64
	allRan := make(chan struct{})
	w, rc, err := b.stepWorker(name, append([]string{leader}, followers...), queue, b.cfg.Clients, func(ctx context.Context, job *worker.Job) error {
		defer func() {
			if handled.Add(1) == int64(n) {
				close(allRan)
			}
		}()
		for i := range benchStepsPerJob {
			if _, err := job.Step(ctx, "step", func(context.Context) (any, error) {
				ran.Add(1)
				return i, nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer rc.close()
	timeout := 60*time.Second + time.Duration(n)*100*time.Millisecond
	ph := b.startPhase(ctx, name, leader)
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	var runErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		runErr = w.Run(runCtx)
	}()
	var problems []string
	end := time.Now()
	select {
	case <-allRan:
		end, err = b.waitQueueDone(ctx, leader, queue, n, timeout, time.Millisecond)
		if err != nil {
			problems = append(problems, err.Error())
		}
	case <-stopped:
	case <-time.After(timeout):
		problems = append(problems, fmt.Sprintf("timed out after %s", timeout))
	case <-ctx.Done():
	}
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: b.cfg.Clients, Target: "leader", Jobs: n}
	d := ph.end(ctx, end, &fg)
	stopWorker()
	<-stopped
	if runErr != nil {
		problems = append(problems, fmt.Sprintf("the worker stopped: %v", runErr))
	}
	if got, want := ran.Load(), int64(n*benchStepsPerJob); got != want {
		problems = append(problems, fmt.Sprintf("the step functions ran %d times for %d steps", got, want))
	}
	if n := rc.reads.Load() + rc.pages.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d journal reads for jobs with no recorded step", n))
	}
	fg.Value, fg.Errors = float64(n)/d.Seconds(), errs.Load()
	fg.Note = fmt.Sprintf("one Go SDK worker with %d slots; each job's handler calls job.Step %d times in sequence (%d records, %.0f steps/s); "+
		"timed from the worker's start until the leader counts every job done", b.cfg.Clients, benchStepsPerJob, n*benchStepsPerJob,
		float64(n*benchStepsPerJob)/d.Seconds())
	problems = append(problems, b.checkJournals(ctx, leader, t, benchStepsPerJob)...)
	problems = append(problems, b.trackFromHistory(ctx, leader, queue, t)...)
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	return []Figure{fg}, nil
}

// errResumeAgain fails a timed resume of step_resume on purpose, so that
// the next attempt resumes the same journal.
var errResumeAgain = errors.New("bench: resume again")

// stepResume measures the resume of a job with a long journal: claim to
// the first new step. A job's journal is filled with --resume-steps steps
// (at most max_steps_per_job less one, so that the new step can be
// recorded) through PUTs under a first attempt's lease, and that attempt
// fails. A Go SDK worker then runs the job: its handler calls job.Step
// --resume-steps+1 times, and the time from the handler's start (the
// claim reply has arrived) to the call of the new step's function is one
// resume. The new step fails (nothing recorded) benchResumeRounds-1
// times, so that the next attempt resumes the same journal; the last time
// it is recorded and the job ends done. Twice: with steps whose result is
// null (the journal's listing says so: no result to read) and with a
// small result each (read back with the listing, ?results=1).
func (b *bencher) stepResume(ctx context.Context) ([]Figure, error) {
	leader, followers, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	var figs []Figure
	for _, withResults := range []bool{false, true} {
		name := "step_resume"
		if withResults {
			name = "step_resume_results"
		}
		fg, err := b.resumeOne(ctx, name, leader, followers, withResults)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		figs = append(figs, fg...)
	}
	return figs, nil
}

// resumeResult is what step_resume's steps record in the "results" run: a
// small JSON result per step.
func resumeResult(i int) json.RawMessage { return fmt.Appendf(nil, `{"i":%d}`, i) }

func (b *bencher) resumeOne(ctx context.Context, name, leader string, followers []string, withResults bool) ([]Figure, error) {
	steps := min(b.cfg.ResumeSteps, benchResumeMaxSteps-1)
	queue := b.queue(name)
	attempts := benchResumeRounds + 1
	job := wire.SubmitRequest{Type: benchStepType, Queue: queue, MaxAttempts: &attempts, Timeout: "5m",
		Backoff: &wire.Backoff{Base: "1ms", Max: "1ms"}}
	var ref jobRef
	if _, err := b.do(ctx, http.MethodPost, leader+"/jobs", mustJSON(job), &ref, nil); err != nil || ref.ID == "" {
		return nil, fmt.Errorf("submit: %q, %v", ref.ID, err)
	}
	id := ref.ID

	// Fill: one attempt records every step, then fails.
	fillStart := time.Now()
	var claim wire.ClaimResponse
	creq := wire.ClaimRequest{WorkerID: fmt.Sprintf("bench-%s-%s-fill", b.runID, name), Queues: []string{queue}, Types: []string{benchStepType}, Max: 1, Wait: "5s", ClaimSeq: 1}
	if _, err := b.do(ctx, http.MethodPost, leader+"/jobs/claim", mustJSON(creq), &claim, nil); err != nil || len(claim.Jobs) != 1 {
		return nil, fmt.Errorf("claim to fill the journal: %d jobs, %v", len(claim.Jobs), err)
	}
	lease := claim.Jobs[0].Lease
	var next atomic.Int64
	var fillErr atomic.Pointer[error]
	var wg sync.WaitGroup
	for range benchResumeFillers {
		wg.Go(func() {
			for ctx.Err() == nil && fillErr.Load() == nil {
				i := int(next.Add(1))
				if i > steps {
					return
				}
				req := wire.StepRequest{Lease: lease}
				if withResults {
					req.Result = resumeResult(i)
				}
				st, err := b.do(ctx, http.MethodPut, leader+"/jobs/"+id+"/steps/"+url.PathEscape(stepKey("s", i)), mustJSON(req), nil, nil)
				if err != nil && st != http.StatusConflict {
					fillErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if p := fillErr.Load(); p != nil {
		return nil, fmt.Errorf("fill the journal: %w", *p)
	}
	if _, err := b.do(ctx, http.MethodPost, leader+"/jobs/"+id+"/fail", fmt.Appendf(nil, `{"lease":%d,"error":"bench: journal filled"}`, lease), nil, nil); err != nil {
		return nil, fmt.Errorf("fail the filling attempt: %w", err)
	}
	fillSecs := time.Since(fillStart).Seconds()

	var (
		mu       sync.Mutex
		resumes  []float64
		requests []string
		bad      []string
		replayed atomic.Int64
		rounds   atomic.Int64
	)
	done := make(chan struct{})
	var rc *reqCounter
	w, rc, err := b.stepWorker(name, append([]string{leader}, followers...), queue, 1, func(ctx context.Context, job *worker.Job) error {
		began := time.Now()
		r0, p0, n0 := rc.reads.Load(), rc.pages.Load(), rc.readsNotFound.Load()
		round := rounds.Add(1)
		note := func(s string) {
			mu.Lock()
			bad = append(bad, s)
			mu.Unlock()
		}
		for i := 1; i <= steps; i++ {
			got, err := job.Step(ctx, "s", func(context.Context) (any, error) {
				note(fmt.Sprintf("attempt %d: recorded step %s ran again", job.Attempt, stepKey("s", i)))
				return nil, nil
			})
			if err != nil {
				return err
			}
			if want := resumeResult(i); withResults && string(got) != string(want) || !withResults && len(got) != 0 && string(got) != "null" {
				note(fmt.Sprintf("attempt %d: step %s replayed %s", job.Attempt, stepKey("s", i), got))
			}
			replayed.Add(1)
		}
		_, err := job.Step(ctx, "s", func(context.Context) (any, error) {
			d := time.Since(began)
			mu.Lock()
			resumes = append(resumes, float64(d)/float64(time.Millisecond))
			requests = append(requests, fmt.Sprintf("%.1f ms: %d step reads (%d not found), %d journal pages",
				float64(d)/float64(time.Millisecond), rc.reads.Load()-r0, rc.readsNotFound.Load()-n0, rc.pages.Load()-p0))
			mu.Unlock()
			if round < benchResumeRounds {
				return nil, errResumeAgain
			}
			return "new", nil
		})
		if round >= benchResumeRounds {
			close(done)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	defer rc.close()
	ph := b.startPhase(ctx, name, leader)
	problems := runStepWorker(ctx, w, done, 120*time.Second+time.Duration(steps*benchResumeRounds)*time.Millisecond)
	fg := Figure{Unit: "ms", Clients: 1, Target: "leader", Jobs: steps}
	ph.end(ctx, time.Time{}, &fg)
	if _, err := b.waitQueueDone(ctx, leader, queue, 1, 30*time.Second, 5*time.Millisecond); err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, bad...)
	if got, want := replayed.Load(), int64(steps*benchResumeRounds); got != want {
		problems = append(problems, fmt.Sprintf("%d steps replayed in %d resumes of %d steps", got, benchResumeRounds, steps))
	}
	var j wire.Job
	if _, err := b.do(ctx, http.MethodGet, leader+"/jobs/"+id, nil, &j, nil); err != nil {
		problems = append(problems, fmt.Sprintf("get job %s: %v", id, err))
	} else if j.Status != wire.StatusDone || j.Attempts != benchResumeRounds+1 || j.Journal == nil || j.Journal.Count != steps+1 {
		problems = append(problems, fmt.Sprintf("job %s is %s after %d attempts, want done after %d with %d steps recorded", id, j.Status, j.Attempts, benchResumeRounds+1, steps+1))
	}
	fg.check(problems)
	sorted := slices.Clone(resumes)
	slices.Sort(sorted)
	kind := "null results (the listing says there is none to read)"
	if withResults {
		kind = fmt.Sprintf("a %d-byte result each", len(resumeResult(steps)))
	}
	fg.Note = fmt.Sprintf("claim reply → first new step of a job with %d recorded steps of %s, through the Go SDK (job.Step replays each); "+
		"%d resumes: %s; journal filled in %.1fs by %d concurrent PUTs",
		steps, kind, len(resumes), strings.Join(requests, "; "), fillSecs, benchResumeFillers)
	figs := []Figure{fg, fg}
	figs[0].Figure, figs[0].Value = name+"_median", percentile(sorted, 0.5)
	figs[1].Figure, figs[1].Value = name+"_max", percentile(sorted, 1)
	return figs, nil
}

// stepKey is the key of the i-th step named name in an attempt, as the
// SDK numbers them: name, name#2, name#3...
func stepKey(name string, i int) string {
	if i == 1 {
		return name
	}
	return name + "#" + strconv.Itoa(i)
}
