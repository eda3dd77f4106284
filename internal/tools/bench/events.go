package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
)

// Shapes of event_wake.
const (
	benchWakeEvent   = "bench.wake" // the event name the jobs wait for (their key is the job id)
	benchWakeRate    = 100          // events sent per second
	benchWakeWorkers = 8            // long-polling virtual workers
)

// wakeRound is what event_wake knows of one job.
type wakeRound struct {
	sent    time.Time // the POST /events was sent
	woke    int       // the reply's woke
	started time.Time // the claim reply of the attempt after the wait arrived
	done    bool
}

// eventWake measures event → wake-up: --jobs/10 jobs (at most 2,000)
// each park on a wait for event benchWakeEvent with its own id as the
// key (POST /jobs/{id}/steps/{key}/wait by a virtual worker that claimed
// it), then the events are sent at benchWakeRate a second while
// benchWakeWorkers virtual workers long-poll (each hands what it claims
// to a goroutine and polls again); the figure is each job's
// time from the start of its POST /events to the arrival of the claim
// reply of its next attempt. That attempt asks for the wait again and
// must get the step recorded with the payload sent (409 step_recorded),
// then reports done.
func (b *bencher) eventWake(ctx context.Context) ([]Figure, error) {
	const name = "event_wake"
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	queue := b.queue(name)
	n := min(max(b.cfg.Jobs/10, 1), 2000)
	t := newTracker()
	var errs atomic.Int64
	b.submitJobs(ctx, leader, wire.SubmitRequest{Type: benchStepType, Queue: queue}, n, benchBatchSize, benchBatchClients, time.Time{}, t, &errs)
	if got := t.accepted(); got != n {
		return nil, fmt.Errorf("pre-submitted %d of %d jobs", got, n)
	}
	var (
		mu       sync.Mutex
		rounds   = make(map[string]*wakeRound, n)
		problems []string
		parked   atomic.Int64
		finished atomic.Int64
	)
	note := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		mu.Lock()
		if len(problems) < 5 {
			b.progress("bench: %s: %s", name, msg) // a broken run says why at once
		}
		if len(problems) < 100 {
			problems = append(problems, msg)
		}
		mu.Unlock()
	}
	workCtx, stop := context.WithTimeout(ctx, 120*time.Second+time.Duration(n)*20*time.Millisecond)
	defer stop()
	var workers, handling sync.WaitGroup
	for i := range benchWakeWorkers {
		id := fmt.Sprintf("bench-%s-ew%d", b.runID, i)
		workers.Go(func() {
			req := wire.ClaimRequest{WorkerID: id, Queues: []string{queue}, Types: []string{benchStepType}, Max: 1, Wait: "30s"}
			for workCtx.Err() == nil && finished.Load() < int64(n) {
				req.ClaimSeq++
				var reply wire.ClaimResponse
				st, err := b.do(workCtx, http.MethodPost, leader+"/jobs/claim", mustJSON(req), &reply, &errs)
				at := time.Now()
				if classify(st, err) != outOK {
					if workCtx.Err() == nil {
						errs.Add(1)
						b.noteError("claim", st, err)
						sleepCtx(workCtx, 20*time.Millisecond)
					}
					continue
				}
				for _, j := range reply.Jobs {
					t.claimed(j.ID, t.claims(j.ID)+1, j.Lease, at) // a parked attempt is not counted: number the claims
					// The worker goes back to its long-poll at once: a woken
					// job must not wait for a busy worker.
					handling.Go(func() { b.wakeAttempt(workCtx, leader, j, at, rounds, &mu, note, &parked, &finished, t) })
				}
			}
		})
	}

	// Every job parks on its first attempt; then the events go out.
	if err := pollUntil(workCtx, func() bool { return parked.Load() >= int64(n) }); err != nil {
		note("%d of %d jobs parked: %v", parked.Load(), n, err)
	}
	ph := b.startPhase(ctx, name, leader)
	ids := t.ids()
	interval := time.Second / benchWakeRate
	var sends sync.WaitGroup
	for i, id := range ids {
		if workCtx.Err() != nil {
			break
		}
		sleepCtx(workCtx, time.Until(ph.start.Add(time.Duration(i)*interval)))
		sends.Go(func() {
			body := mustJSON(map[string]any{"name": benchWakeEvent, "key": id, "payload": map[string]string{"job": id}})
			sent := time.Now()
			var reply struct {
				Seq  uint64 `json:"seq"`
				Woke int    `json:"woke"`
			}
			if st, err := b.do(workCtx, http.MethodPost, leader+"/events", body, &reply, &errs); err != nil {
				note("POST /events for job %s: HTTP %d %v", id, st, err)
				return
			}
			mu.Lock()
			r := rounds[id]
			if r == nil {
				r = &wakeRound{}
				rounds[id] = r
			}
			r.sent, r.woke = sent, reply.Woke
			mu.Unlock()
		})
	}
	sends.Wait()
	if err := pollUntil(workCtx, func() bool { return finished.Load() >= int64(n) }); err != nil {
		note("%d of %d jobs done: %v", finished.Load(), n, err)
	}
	stop()
	workers.Wait()
	handling.Wait()
	fg := Figure{Unit: "ms", Clients: benchWakeWorkers, Target: "leader", Jobs: n}
	ph.end(ctx, time.Time{}, &fg)
	fg.Errors = errs.Load()
	var lat []float64
	mu.Lock()
	for _, id := range ids {
		r := rounds[id]
		switch {
		case r == nil || r.sent.IsZero():
			note("job %s: no event sent", id)
		case r.woke != 1:
			note("job %s: its event woke %d jobs, want 1", id, r.woke)
		case r.started.IsZero() || !r.done:
			note("job %s: not run again and done after its event", id)
		default:
			lat = append(lat, float64(r.started.Sub(r.sent))/float64(time.Millisecond))
		}
	}
	got := slices.Clone(problems)
	mu.Unlock()
	slices.Sort(lat)
	fg.Note = fmt.Sprintf("POST /events sent → claim reply of the waiting job's next attempt received: %d jobs parked on a wait for an event "+
		"keyed by the job's id, events sent at %d a second, %d workers long-polling 30s", n, benchWakeRate, benchWakeWorkers)
	if _, err := b.waitQueueDone(ctx, leader, queue, n, 30*time.Second, 5*time.Millisecond); err != nil {
		got = append(got, err.Error())
	}
	fg.check(got, t.check(true))
	var figs []Figure
	for _, q := range []struct {
		name string
		p    float64
	}{{"event_wake_p50", 0.50}, {"event_wake_p99", 0.99}, {"event_wake_max", 1}} {
		f := fg
		f.Figure, f.Value = q.name, percentile(lat, q.p)
		figs = append(figs, f)
	}
	return figs, nil
}

// wakeAttempt handles one claimed attempt of event_wake: it asks for the
// wait. The first attempt parks (201, parked). The next, after the event,
// gets the wait recorded with the event's payload (409 step_recorded, the
// step in the reply) and reports done. A parked attempt is not charged,
// so both are attempt 1 of the job: the tracker counts claims instead.
func (b *bencher) wakeAttempt(ctx context.Context, leader string, j wire.Job, at time.Time, rounds map[string]*wakeRound,
	mu *sync.Mutex, note func(string, ...any), parked, finished *atomic.Int64, t *tracker) {
	wait := mustJSON(map[string]any{"lease": j.Lease, "event": benchWakeEvent, "key": j.ID})
	u := leader + "/jobs/" + j.ID + "/steps/wait/wait"
	var reply struct {
		Parked bool       `json:"parked"`
		Step   *wire.Step `json:"step"`
		Code   string     `json:"code"`
	}
	st, err := b.callPrefer(ctx, http.MethodPost, u, wait, "", &reply)
	switch {
	case st == http.StatusCreated && reply.Parked:
		parked.Add(1)
		return
	case st != http.StatusConflict:
		note("job %s: the wait gave HTTP %d, parked %v: %v", j.ID, st, reply.Parked, err)
		return
	}
	mu.Lock()
	r := rounds[j.ID]
	if r == nil {
		r = &wakeRound{}
		rounds[j.ID] = r
	}
	if r.started.IsZero() {
		r.started = at
	}
	mu.Unlock()
	// The 409's body is not decoded by call: read the step.
	var step wire.Step
	if _, err := b.do(ctx, http.MethodGet, leader+"/jobs/"+j.ID+"/steps/wait", nil, &step, nil); err != nil {
		note("job %s: read its wait: %v", j.ID, err)
	} else if want := mustJSON(map[string]string{"job": j.ID}); step.Status != wire.StepOK || !jsonEqual(step.Result, want) {
		note("job %s: its wait is %s with %s, want ok with %s", j.ID, step.Status, step.Result, want)
	}
	if st, err := b.do(ctx, http.MethodPost, leader+"/jobs/"+j.ID+"/done", fmt.Appendf(nil, `{"lease":%d}`, j.Lease), nil, nil); err != nil {
		note("job %s: report done: HTTP %d %v", j.ID, st, err)
		return
	}
	t.done(j.ID, j.Lease)
	mu.Lock()
	r.done = true
	mu.Unlock()
	finished.Add(1)
}

// pollUntil polls cond every 5ms until it holds or ctx ends.
func pollUntil(ctx context.Context, cond func() bool) error {
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleepCtx(ctx, 5*time.Millisecond)
	}
	return nil
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// ids are the submitted jobs' ids, in the order the replies came.
func (t *tracker) ids() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.order)
}

// claims is how many claims of job id the tracker holds.
func (t *tracker) claims(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.jobs[id]; r != nil {
		return len(r.claims)
	}
	return 0
}
