package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// Shape of bulk_retry_kill.
const (
	benchKillAt      = 0.2                   // the leader dies once a poll reads this share of the jobs done
	benchKillPoll    = 20 * time.Millisecond // between two reads of GET /bulk/{id}
	benchKillRequest = 2 * time.Second       // per request of the poller and of the submitter
	benchKillPause   = 50 * time.Millisecond // before a submit's next try
)

// bulkRetryKill is bulk_retry (bulk.go) on three `workron server`
// processes whose leader is SIGKILLed in the middle of the bulk retry
// (issue #30: "a leader SIGKILL in the middle loses no progress and
// retries no job twice"). It fills a queue with --bulk-jobs failed jobs,
// sends single submits to another queue at benchBulkSubmitRate a second
// (steadySubmits: to the node believed to lead, each submit tried again
// on the next node, with its idempotency key, until it is accepted), for
// benchBulkBaseline alone, then starts POST /bulk retrying every failed
// job of the queue. A poller reads GET /bulk/{id} every benchKillPoll,
// from the three nodes in turn; once a read shows benchKillAt of the jobs
// done, the leader is SIGKILLed, a new one awaited and the killed node
// restarted, and the poll goes on until the action ends (then each node
// is read once more).
//
// Correct if the action ended done with every job matched and done, none
// skipped or failed, its counts never went down from one read to the next
// (each read is consistent and made after the one before: a count that
// goes down is progress lost), the kill landed while it ran, and every
// node ends with the same counts; if the queue then holds the failed jobs
// and no other, every one pending with no attempt counted, the one failed
// attempt in its history, and run_at moved by this action (checkRetried);
// and if every submit was accepted once and the other queue holds exactly
// those jobs. A job retried twice would be a retry of a pending job,
// which the cluster refuses: the action would count it skipped, or done
// more than once, and matched would exceed --bulk-jobs.
func (b *bencher) bulkRetryKill(ctx context.Context) ([]Figure, error) {
	c, err := b.startProcCluster(ctx, "bulk_retry_kill")
	if err != nil {
		return nil, err
	}
	defer c.stop()
	pb := b.onNodes(c.URLs())
	defer pb.hc.CloseIdleConnections()
	return c.withServerCPU(func() ([]Figure, error) { return pb.bulkKill(ctx, c) })
}

// killReport is what bulkKill saw of its kill.
type killReport struct {
	missed  bool // the action had ended before a read showed benchKillAt done
	at      time.Time
	node    string
	share   float64       // of the jobs done at the last read before the kill
	elected time.Duration // kill → a survivor said it leads
	wrote   time.Time     // the first submit sent after the kill was accepted
}

// bulkKill runs bulk_retry_kill on c (see bulkRetryKill).
func (b *bencher) bulkKill(ctx context.Context, c *procCluster) ([]Figure, error) {
	const name = "bulk_retry_kill"
	li, _, err := c.leader(ctx, b)
	if err != nil {
		return nil, err
	}
	leader := c.Nodes[li].URL
	queue := b.queue(name)
	n := b.cfg.BulkJobs
	b.progress("bench: %s: failing %d jobs", name, n)
	failedT, err := b.fillFailed(ctx, leader, queue, n)
	if err != nil {
		return nil, err
	}

	s := newSteadySubmits(b, c.URLs(), li, b.queue(name+"_submits"))
	subCtx, stopSubmits := context.WithCancel(ctx)
	var subs sync.WaitGroup
	subs.Go(func() { s.run(subCtx) })
	defer func() { stopSubmits(); subs.Wait() }()
	sleepCtx(ctx, benchBulkBaseline)

	b.progress("bench: %s: retrying %d failed jobs, killing the leader at %.0f %%", name, n, 100*benchKillAt)
	started := time.Now()
	var op wire.Bulk
	st, err := b.call(ctx, http.MethodPost, leader+"/bulk", mustJSON(wire.BulkRequest{Action: wire.BulkRetry, Status: wire.StatusFailed, Queue: queue}), &op)
	if err != nil || st != http.StatusCreated {
		return nil, fmt.Errorf("%s: POST /bulk: HTTP %d: %v", name, st, err)
	}
	p := &bulkPoller{b: b, urls: c.URLs(), id: op.ID}
	polled := make(chan error, 1)
	go func() { polled <- p.run(ctx, 10*time.Minute+time.Duration(n)*time.Millisecond) }()
	kill, killErr := b.killMidBulk(ctx, c, p, s, n)
	perr := <-polled
	stopSubmits()
	subs.Wait()
	if killErr != nil {
		return nil, fmt.Errorf("%s: %w", name, killErr)
	}
	p.readAll(ctx) // every node, the restarted one included, once the action ended

	obs := p.observations()
	var problems []string
	if perr != nil {
		problems = append(problems, perr.Error())
	}
	problems = append(problems, checkProgress(obs, n)...)
	if kill.missed {
		problems = append(problems, fmt.Sprintf("the action ended before a read showed %.0f %% of it done: no leader was killed in the middle", 100*benchKillAt))
	}
	if li, _, err = c.leader(ctx, b); err != nil {
		return nil, err
	}
	leader = c.Nodes[li].URL
	jobProblems := b.verifyQueuesCounts(ctx, leader, []string{queue}, wire.StatusPending, failedT)
	jobProblems = append(jobProblems, b.checkRetriedQueue(ctx, leader, queue, failedT.ids(), op.CreatedAt)...)
	subProblems := append(s.check(), b.verifyQueue(ctx, leader, s.queue, wire.StatusPending, s.t)...)

	last := obs[len(obs)-1]
	total := last.At.Sub(started)
	if end, ok := firstEnded(obs); ok {
		total = end.At.Sub(started)
	}
	resume, resumeSeen := resumeAfter(obs, kill.at)
	before, after := aroundKill(obs, kill.at)
	figs := []Figure{
		{Figure: name, Unit: "s", Value: total.Seconds(), Seconds: total.Seconds(), Jobs: n, Target: "any node", Load1: loadAverage(),
			Note: fmt.Sprintf("POST /bulk retry of %d failed jobs on 3 server processes until GET /bulk/{id} says done (%.0f jobs/s), the leader %s SIGKILLed at %.0f %% done "+
				"(last read before the kill), a survivor leading %.2f s later, the killed node restarted; done at the last read before the kill %d, at the first after it %d; "+
				"%d reads of GET /bulk/{id} every %s from the nodes in turn, %d failed; %d single submits a second beside it",
				n, float64(n)/total.Seconds(), kill.node, 100*kill.share, kill.elected.Seconds(), before.Bulk.Done, after.Bulk.Done,
				len(obs), benchKillPoll, p.failed(), benchBulkSubmitRate)},
		{Figure: name + "_resume", Unit: "s", Value: resume.Seconds(), Jobs: n, Target: "any node", Load1: loadAverage(),
			Note: fmt.Sprintf("SIGKILL of the leader → the first bulk step a new leader applied (the action's updated_at of the first read after the kill that shows one); "+
				"the poller read it %.2f s after the kill; a survivor said it leads after %.2f s", resumeSeen.Seconds(), kill.elected.Seconds())},
	}
	figs[0].check(problems, jobProblems)
	figs[1].check(problems, jobProblems)
	return append(figs, s.figures(name, started, last.At, kill, subProblems)...), nil
}

// killMidBulk waits until a read shows benchKillAt of the n jobs done,
// SIGKILLs the node leading then, waits until a survivor leads (and points
// the submits at it), restarts the killed node and waits for the first
// submit sent after the kill to be accepted.
func (b *bencher) killMidBulk(ctx context.Context, c *procCluster, p *bulkPoller, s *steadySubmits, n int) (killReport, error) {
	var last bulkObs
	err := poll.True(ctx, 10*time.Minute+time.Duration(n)*time.Millisecond, 5*time.Millisecond, func() bool {
		var ok bool
		last, ok = p.last()
		return ok && (float64(last.Bulk.Done) >= benchKillAt*float64(n) || last.Bulk.State != wire.BulkRunning)
	})
	if err != nil {
		return killReport{}, fmt.Errorf("the bulk action did not reach %.0f %% done: %w", 100*benchKillAt, err)
	}
	if last.Bulk.State != wire.BulkRunning {
		return killReport{missed: true}, nil
	}
	li, h, err := c.leader(ctx, b)
	if err != nil {
		return killReport{}, err
	}
	node := c.Nodes[li]
	if !node.Signal(syscall.SIGKILL) {
		return killReport{}, fmt.Errorf("kill the leader %s: it is not running", node.Name)
	}
	k := killReport{at: time.Now(), node: node.Name, share: float64(last.Bulk.Done) / float64(n)}
	wrote := s.watch.arm(k.at)
	node.Kill() // reap it
	if k.elected = c.waitNewLeader(ctx, b, li, k.at); k.elected == 0 {
		return k, fmt.Errorf("no survivor leads within %s of killing %s", benchFailoverWait, node.Name)
	}
	nl, nh, err := c.leader(ctx, b)
	if err != nil {
		return k, err
	}
	s.target.Store(int64(nl))
	if err := c.Restart(ctx, node); err != nil {
		return k, err
	}
	b.progress("bench: bulk_retry_kill: killed %s (term %d) at %.0f %% done; %s leads in term %d after %.0f ms; %s restarted",
		node.Name, h.Term, 100*k.share, c.Nodes[nl].Name, nh.Term, k.elected.Seconds()*1000, node.Name)
	select {
	case k.wrote = <-wrote:
	case <-time.After(benchFailoverWait):
		return k, fmt.Errorf("no submit accepted within %s of killing the leader %s", benchFailoverWait, node.Name)
	case <-ctx.Done():
		return k, ctx.Err()
	}
	return k, nil
}

// bulkObs is one read of GET /bulk/{id}.
type bulkObs struct {
	At   time.Time // when the reply was read
	Node int       // index of the node read
	Bulk wire.Bulk
}

// bulkPoller reads a bulk action from the nodes in turn, one read at a
// time, and keeps every reply.
type bulkPoller struct {
	b    *bencher
	urls []string
	id   string

	mu    sync.Mutex
	obs   []bulkObs
	fails int
}

// read reads the action from node i once and keeps the reply; false if it
// failed.
func (p *bulkPoller) read(ctx context.Context, i int) (wire.Bulk, bool) {
	rctx, cancel := context.WithTimeout(ctx, benchKillRequest)
	defer cancel()
	var op wire.Bulk
	st, err := p.b.call(rctx, http.MethodGet, p.urls[i]+"/bulk/"+p.id, nil, &op)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || st != http.StatusOK {
		p.fails++
		return op, false
	}
	p.obs = append(p.obs, bulkObs{At: time.Now(), Node: i, Bulk: op})
	return op, true
}

// run reads every benchKillPoll, the nodes in turn, until a read says the
// action ended or bound passes.
func (p *bulkPoller) run(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for i := 0; ; i++ {
		if op, ok := p.read(ctx, i%len(p.urls)); ok && op.State != wire.BulkRunning {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			last, _ := p.last()
			return fmt.Errorf("bulk %s still %s after %s: %d done", p.id, last.Bulk.State, bound, last.Bulk.Done)
		}
		sleepCtx(ctx, benchKillPoll)
	}
}

// readAll reads the action from every node once, each until it answers
// (for up to benchRetryFor).
func (p *bulkPoller) readAll(ctx context.Context) {
	for i := range p.urls {
		_ = poll.True(ctx, benchRetryFor, benchKillPoll, func() bool { _, ok := p.read(ctx, i); return ok })
	}
}

func (p *bulkPoller) last() (bulkObs, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.obs) == 0 {
		return bulkObs{}, false
	}
	return p.obs[len(p.obs)-1], true
}

func (p *bulkPoller) observations() []bulkObs {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bulkObs(nil), p.obs...)
}

func (p *bulkPoller) failed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fails
}

// checkProgress lists what the reads of a bulk action of n jobs show
// going wrong: none at all; a count that went down from one read to the
// next (each read consistent and made after the one before, so a count
// that goes down is progress lost); an action that ran again after it
// ended; an action that did not end done with n matched and done, none
// skipped or failed.
func checkProgress(obs []bulkObs, n int) []string {
	if len(obs) == 0 {
		return []string{"no read of the bulk action succeeded"}
	}
	var out []string
	for i := 1; i < len(obs) && len(out) < benchMaxProblems; i++ {
		a, b := obs[i-1].Bulk, obs[i].Bulk
		if b.Matched < a.Matched || b.Done < a.Done || b.Skipped < a.Skipped || b.Failed < a.Failed {
			out = append(out, fmt.Sprintf("progress went back from read %d (node %d: matched %d, done %d, skipped %d, failed %d) to read %d (node %d: matched %d, done %d, skipped %d, failed %d)",
				i, obs[i-1].Node+1, a.Matched, a.Done, a.Skipped, a.Failed, i+1, obs[i].Node+1, b.Matched, b.Done, b.Skipped, b.Failed))
		}
		if a.State != wire.BulkRunning && b.State != a.State {
			out = append(out, fmt.Sprintf("the action was %s at read %d and %s at read %d", a.State, i, b.State, i+1))
		}
	}
	if op := obs[len(obs)-1].Bulk; op.State != wire.BulkDone || op.Matched != int64(n) || op.Done != int64(n) || op.Skipped != 0 || op.Failed != 0 {
		out = append(out, fmt.Sprintf("the bulk retry ended %s with %d matched, %d done, %d skipped, %d failed; want done with %d matched and done",
			op.State, op.Matched, op.Done, op.Skipped, op.Failed, n))
	}
	return out
}

// firstEnded is the first read that says the action ended.
func firstEnded(obs []bulkObs) (bulkObs, bool) {
	for _, o := range obs {
		if o.Bulk.State != wire.BulkRunning {
			return o, true
		}
	}
	return bulkObs{}, false
}

// aroundKill are the last read before killed and the first after it.
func aroundKill(obs []bulkObs, killed time.Time) (before, after bulkObs) {
	for _, o := range obs {
		if !o.At.After(killed) {
			before = o
		} else if after.At.IsZero() {
			after = o
		}
	}
	return before, after
}

// resumeAfter is the time from killed to the first bulk step applied after
// it, by the action's updated_at (the entry's time, on the leader's clock
// on this machine) of the first read that shows one, and when that read
// came (zero if none did).
func resumeAfter(obs []bulkObs, killed time.Time) (applied, seen time.Duration) {
	if killed.IsZero() {
		return 0, 0
	}
	for _, o := range obs {
		if o.At.After(killed) && o.Bulk.UpdatedAt.After(killed) {
			return o.Bulk.UpdatedAt.Sub(killed), o.At.Sub(killed)
		}
	}
	return 0, 0
}

// checkRetriedQueue lists every job of queue (all statuses) and checks them
// with checkRetried.
func (b *bencher) checkRetriedQueue(ctx context.Context, leader, queue string, ids []string, since time.Time) []string {
	q := url.Values{"queue": {queue}, "limit": {"1000"}}
	var jobs []wire.Job
	for {
		var page wire.JobList
		if _, err := b.do(ctx, http.MethodGet, leader+"/jobs?"+q.Encode(), nil, &page, nil); err != nil {
			return []string{"list jobs: " + err.Error()}
		}
		jobs = append(jobs, page.Jobs...)
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	return checkRetried(jobs, ids, since)
}

// checkRetried lists what is wrong with the jobs of a queue after a bulk
// retry that began at since of the failed jobs ids: a job that is not one
// of them or is listed twice, one missing, and one that is not pending
// with no attempt counted, its one failed attempt in its history and its
// run_at at or after since (the retry's time).
func checkRetried(jobs []wire.Job, ids []string, since time.Time) []string {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	seen := make(map[string]bool, len(jobs))
	var out []string
	add := func(format string, args ...any) {
		if len(out) < benchMaxProblems {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	for _, j := range jobs {
		switch {
		case seen[j.ID]:
			add("job %s listed twice", j.ID)
			continue
		case !want[j.ID]:
			add("job %s is in the queue but was not one of the failed jobs", j.ID)
		}
		seen[j.ID] = true
		if j.Status != wire.StatusPending || j.Attempts != 0 || j.RunAt.Before(since) {
			add("job %s is %s with %d attempts counted, run_at %s; want pending with 0, run_at from the retry (%s on)",
				j.ID, j.Status, j.Attempts, j.RunAt.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano))
		}
		if h := j.AttemptHistory; len(h) != 1 || h[0].Status != wire.StatusFailed {
			add("job %s has %d attempts in its history, want its one failed attempt", j.ID, len(h))
		}
	}
	missing := 0
	for _, id := range ids {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 {
		out = append(out, fmt.Sprintf("%d of the %d failed jobs are not in the queue", missing, len(ids)))
	}
	return out
}
