package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/tools/jobcheck"
)

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
	return b.verifyQueues(ctx, leader, []string{queue}, status, t)
}

// verifyQueues is verifyQueue for the jobs of several queues together.
func (b *bencher) verifyQueues(ctx context.Context, leader string, queues []string, status string, t *tracker) []string {
	t.mu.Lock()
	ids := slices.Clone(t.order)
	t.mu.Unlock()
	out := b.verifyQueuesCounts(ctx, leader, queues, status, t)
	out = append(out, b.verifyListing(ctx, leader, queues, status, ids)...)
	return append(out, b.verifySample(ctx, leader, status, ids, t)...)
}

// verifyCounts checks the leader's counts of queue (GET /queues): every
// job of t in status, and no other job.
func (b *bencher) verifyCounts(ctx context.Context, leader, queue, status string, t *tracker) []string {
	return b.verifyQueuesCounts(ctx, leader, []string{queue}, status, t)
}

// verifyQueuesCounts is verifyCounts for the sums of several queues.
func (b *bencher) verifyQueuesCounts(ctx context.Context, leader string, queues []string, status string, t *tracker) []string {
	t.mu.Lock()
	ids, unknown := len(t.order), t.unknown
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
		if slices.Contains(queues, q.Name) {
			for s, n := range q.Counts {
				counts[s] += n
			}
		}
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if counts[status] < ids || total > ids+unknown || total != counts[status] {
		out = append(out, fmt.Sprintf("queues %v hold %v, want %d %s", queues, counts, ids, status))
	}
	return out
}

// verifyListing pages GET /jobs?status=&queue= of each queue until every
// id was seen.
func (b *bencher) verifyListing(ctx context.Context, leader string, queues []string, status string, ids []string) []string {
	missing := make(map[string]bool, len(ids))
	for _, id := range ids {
		missing[id] = true
	}
	for _, queue := range queues {
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
		out = append(out, jobcheck.FinishedOnce(j)...)
		for _, a := range j.AttemptHistory {
			if a.Status == wire.StatusDone && a.Lease != r.doneLease {
				out = append(out, fmt.Sprintf("job %s: done under lease %d, the bench reported lease %d", id, a.Lease, r.doneLease))
			}
		}
	}
	return out
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
