package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
)

// submit sends one submit request (POST /jobs, or /jobs/batch with
// Prefer: return=minimal when size > 1) and records the jobs. It does not
// retry a request whose outcome is unknown (that needs idempotency keys,
// which would change what is measured); the checks allow for such jobs.
func (b *bencher) submit(ctx context.Context, target string, body []byte, size int, t *tracker, errs *atomic.Int64) {
	u, prefer := target+"/jobs", ""
	if size > 1 {
		u, prefer = u+"/batch", wire.PreferMinimal
	}
	start := time.Now()
	var reply struct {
		jobRef          // POST /jobs
		IDs    []string `json:"ids"`  // POST /jobs/batch
		Jobs   []jobRef `json:"jobs"` // from a server without the minimal reply (--bin)
	}
	st, err := b.doPrefer(ctx, http.MethodPost, u, body, prefer, &reply, errs)
	for _, j := range reply.Jobs {
		reply.IDs = append(reply.IDs, j.ID)
	}
	o := classify(st, err)
	if o == outOK && size > 1 && len(reply.IDs) != size {
		// Not one id a job: the reply is not what was asked for.
		o, err = outRejected, fmt.Errorf("POST %s: %d ids in the reply to a batch of %d", u, len(reply.IDs), size)
	}
	switch {
	case o == outOK && size == 1:
		t.submitted(reply.ID, start)
		return
	case o == outOK:
		for _, id := range reply.IDs {
			t.submitted(id, start)
		}
		return
	case o == outUnknown && ctx.Err() == nil:
		t.submitUnknown(size)
	}
	errs.Add(1)
	b.noteError("submit", st, err)
}

// submitMany has clients clients submit n jobs of `true` to queue (or
// submit until the deadline, if set) on target, per jobs to a request.
func (b *bencher) submitMany(ctx context.Context, target, queue string, n, per, clients int, deadline time.Time, t *tracker, errs *atomic.Int64) {
	b.submitJobs(ctx, target, wire.SubmitRequest{Command: "true", Queue: queue}, n, per, clients, deadline, t, errs)
}

// submitJobs is submitMany for n copies of job.
func (b *bencher) submitJobs(ctx context.Context, target string, job wire.SubmitRequest, n, per, clients int, deadline time.Time, t *tracker, errs *atomic.Int64) {
	b.submitShaped(ctx, target, job, nil, n, per, clients, deadline, t, errs)
}

// submitShaped is submitJobs for n jobs made from job, shape (when not
// nil) setting the fields of the i-th one's own (from 0, in the order the
// requests take them).
func (b *bencher) submitShaped(ctx context.Context, target string, job wire.SubmitRequest, shape func(i int, j *wire.SubmitRequest), n, per, clients int, deadline time.Time, t *tracker, errs *atomic.Int64) {
	base := make([]wire.SubmitRequest, per)
	for i := range base {
		base[i] = job
	}
	single := mustJSON(job)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			jobs := base
			if shape != nil {
				jobs = slices.Clone(base) // this client's own
			}
			for ctx.Err() == nil {
				size := per
				from := int(next.Add(int64(per))) - per
				if deadline.IsZero() {
					if from >= n {
						return
					}
					size = min(per, n-from)
				} else if time.Now().After(deadline) {
					return
				}
				if shape != nil {
					for k := range size {
						jobs[k] = job
						shape(from+k, &jobs[k])
					}
				}
				body := single
				switch {
				case size > 1:
					body = mustJSON(wire.BatchSubmitRequest{Jobs: jobs[:size]})
				case shape != nil:
					body = mustJSON(jobs[0])
				}
				b.submit(ctx, target, body, size, t, errs)
			}
		})
	}
	wg.Wait()
}

func (b *bencher) submitSingle(ctx context.Context) ([]Figure, error) {
	leader, followers, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	figs := []Figure{b.submitLoad(ctx, "submit_single", leader, leader, "leader", b.cfg.Jobs, 1, b.cfg.Clients)}
	if len(followers) > 0 {
		figs = append(figs, b.submitLoad(ctx, "submit_single_follower", leader, followers[0], "follower", max(b.cfg.Jobs/4, 1), 1, b.cfg.Clients))
	}
	return figs, nil
}

func (b *bencher) submitBatch(ctx context.Context) ([]Figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	return []Figure{b.submitLoad(ctx, "submit_batch", leader, leader, "leader", 2*b.cfg.Jobs, benchBatchSize, benchBatchClients)}, nil
}

// submitBatchMetadata is submit_batch of the jobs the search index does
// the most for (metadataShape); with submit_batch, against a build with
// the tag workron_bench_noindex, it is the index's cost end to end.
func (b *bencher) submitBatchMetadata(ctx context.Context) ([]Figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	return []Figure{b.submitLoad(ctx, "submit_batch_metadata", leader, leader, "leader", 2*b.cfg.Jobs, benchBatchSize, benchBatchClients)}, nil
}

// Shape of submit_batch_metadata's jobs.
const (
	benchMetaQueues = 4  // queues, a job's is i mod this
	benchMetaTypes  = 4  // job types (no command)
	benchMetaKeys   = 64 // concurrency keys
)

// benchMetaFields are the metadata keys every job of
// submit_batch_metadata has, each of a value no other job has.
var benchMetaFields = [...]string{"customer", "order", "request"}

// metadataShape makes the i-th job of submit_batch_metadata: of one of
// benchMetaQueues queues, benchMetaTypes types and benchMetaKeys
// concurrency keys, and of a value of its own for each of benchMetaFields,
// so that nearly every job brings the index terms new to their lists.
func (b *bencher) metadataShape(queues []string) func(i int, j *wire.SubmitRequest) {
	return func(i int, j *wire.SubmitRequest) {
		n := strconv.Itoa(i)
		j.Queue = queues[i%len(queues)]
		j.Type = "bench-meta-" + strconv.Itoa(i%benchMetaTypes)
		j.ConcurrencyKey = "key-" + strconv.Itoa(i%benchMetaKeys)
		j.Metadata = make(map[string]string, len(benchMetaFields))
		for _, k := range benchMetaFields {
			j.Metadata[k] = k[:1] + b.runID + "-" + n
		}
	}
}

// submitLoad measures clients clients submitting n jobs (or for
// --submit-for) to target, per jobs to a request, into queues nobody
// serves: one queue of jobs of `true`, or, for submit_batch_metadata,
// benchMetaQueues of jobs of metadataShape.
func (b *bencher) submitLoad(ctx context.Context, name, leader, target, role string, n, per, clients int) Figure {
	queues := []string{b.queue(name)}
	job := wire.SubmitRequest{Command: "true", Queue: queues[0]}
	var shape func(int, *wire.SubmitRequest)
	if name == "submit_batch_metadata" {
		queues = queues[:0]
		for q := range benchMetaQueues {
			queues = append(queues, b.queue(name)+"-"+strconv.Itoa(q))
		}
		job, shape = wire.SubmitRequest{}, b.metadataShape(queues)
	}
	t := newTracker()
	var errs atomic.Int64
	var deadline time.Time
	ph := b.startPhase(ctx, name, leader)
	if b.cfg.SubmitFor > 0 {
		deadline = ph.start.Add(b.cfg.SubmitFor)
	}
	b.submitShaped(ctx, target, job, shape, n, per, clients, deadline, t, &errs)
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: clients, Target: role}
	d := ph.end(ctx, time.Time{}, &fg)
	fg.Jobs, fg.Errors = t.accepted(), errs.Load()
	fg.Value = float64(fg.Jobs) / d.Seconds()
	fg.Note = "POST /jobs, one job each, keep-alive; the jobs stay pending"
	if per > 1 {
		fg.Note = fmt.Sprintf("POST /jobs/batch, %d jobs each, Prefer: return=minimal (the reply is the ids); the jobs stay pending", per)
	}
	if shape != nil {
		fg.Note += fmt.Sprintf("; typed jobs of %d queues, %d types, %d concurrency keys and metadata %v of a value each", benchMetaQueues, benchMetaTypes, benchMetaKeys, benchMetaFields)
	}
	fg.check(t.check(false), b.verifyQueues(ctx, leader, queues, wire.StatusPending, t))
	return fg
}
