package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workron/workron/store"
)

// JobIDPrefix starts every id the FSM gives a job.
const JobIDPrefix = "job-"

// submit creates the command's jobs, all or none. A job whose idempotency key
// is held by a retained job is not created: the old job is returned instead.
func (a *applier) submit(s *Submit) Result {
	if len(s.Jobs) == 0 {
		return Result{Err: &ValidationError{Field: "jobs", Reason: "no jobs to submit"}}
	}
	// Resolve idempotency keys first: "$N" may name a job that already exists.
	existing := make([]*store.Job, len(s.Jobs))
	fresh := 0
	keys := make(map[string]bool)
	for i, nj := range s.Jobs {
		if nj.IdempotencyKey == "" {
			fresh++
			continue
		}
		// Two new jobs under one key: a retry could answer only one of them.
		if keys[nj.IdempotencyKey] {
			return Result{Err: &ValidationError{Field: fmt.Sprintf("jobs[%d].idempotency_key", i), Reason: "key " + strconv.Quote(nj.IdempotencyKey) + " is given twice"}}
		}
		keys[nj.IdempotencyKey] = true
		j, err := a.keyHolder(nj.IdempotencyKey)
		if err != nil {
			return Result{Err: err}
		}
		if j == nil {
			fresh++
			continue
		}
		existing[i] = j
	}
	if err := CheckBatchCycles(s.Jobs); err != nil {
		return Result{Err: err}
	}
	ids := make([]string, len(s.Jobs))
	for i, nj := range s.Jobs {
		switch {
		case existing[i] != nil:
			ids[i] = existing[i].ID
		case nj.ID != "":
			if a.tx.HasJob(nj.ID) {
				return Result{Err: &ValidationError{Field: fmt.Sprintf("jobs[%d].id", i), Reason: "job " + nj.ID + " already exists"}}
			}
			// Generated ids own the prefix: a later job would overwrite this one.
			if strings.HasPrefix(nj.ID, JobIDPrefix) {
				return Result{Err: &ValidationError{Field: fmt.Sprintf("jobs[%d].id", i), Reason: "ids starting with " + JobIDPrefix + " are reserved"}}
			}
			if slices.Contains(ids[:i], nj.ID) {
				return Result{Err: &ValidationError{Field: fmt.Sprintf("jobs[%d].id", i), Reason: "job " + nj.ID + " is given twice"}}
			}
			ids[i] = nj.ID
		}
	}
	// Check every dependency before writing anything. Existing ones are
	// read once each, and only their heads, so an edge costs the same
	// whatever its parent's record holds.
	deps := make([][]string, len(s.Jobs))
	parents := make(map[string]*store.JobHead)
	for i, nj := range s.Jobs {
		if existing[i] != nil {
			continue
		}
		for _, d := range nj.DependsOn {
			if n, ok := batchRef(d); ok {
				if n < 0 || n >= len(s.Jobs) || n == i {
					return Result{Err: &ValidationError{Field: "depends_on", Reason: fmt.Sprintf("%q does not name another job of this batch", d)}}
				}
				if e := existing[n]; e != nil && (e.Status == store.StatusFailed || e.Status == store.StatusCancelled) {
					return Result{Err: &ValidationError{Field: "depends_on", Reason: "job " + e.ID + " has already " + string(e.Status)}}
				}
				deps[i] = append(deps[i], "$"+strconv.Itoa(n))
				continue
			}
			dj := parents[d]
			if dj == nil {
				var err error
				if dj, err = a.tx.JobHead(d); errors.Is(err, store.ErrNotFound) {
					return Result{Err: &ValidationError{Field: "depends_on", Reason: "unknown job " + d}}
				}
				a.must(err)
				parents[d] = dj
			}
			if dj.Status == store.StatusFailed || dj.Status == store.StatusCancelled {
				return Result{Err: &ValidationError{Field: "depends_on", Reason: "job " + d + " has already " + string(dj.Status)}}
			}
			deps[i] = append(deps[i], d)
		}
	}
	jobs := make([]*store.Job, len(s.Jobs))
	var seq uint64 // the next of the batch's seqs, allocated in one write
	if fresh > 0 {
		var err error
		seq, err = a.tx.NextSeqs(fresh)
		a.must(err)
	}
	made := make([]store.Job, fresh) // the new jobs, in one allocation
	for i := range s.Jobs {
		if existing[i] != nil {
			jobs[i] = existing[i]
			continue
		}
		if ids[i] == "" {
			ids[i] = jobID(seq)
		}
		jobs[i] = &made[0]
		made = made[1:]
		a.newJob(jobs[i], &s.Jobs[i], ids[i], seq)
		seq++
	}
	// Wire dependencies, then store.
	for i := range s.Jobs {
		if existing[i] != nil {
			continue
		}
		j := jobs[i]
		for _, d := range dedupe(deps[i]) {
			var parent store.JobHead
			if n, ok := batchRef(d); ok {
				parent = store.JobHead{ID: jobs[n].ID, Seq: jobs[n].Seq, Status: jobs[n].Status}
			} else {
				parent = *parents[d]
			}
			j.DependsOn = append(j.DependsOn, parent.ID)
			if parent.Status != store.StatusDone {
				j.Waiting++
			}
			// One edge, not a rewrite of the parent: the cost is the same
			// whatever the parent's number of dependents.
			a.must(a.tx.AddDependent(parent.Seq, j))
		}
		if j.Waiting > 0 {
			j.Status = store.StatusBlocked
		}
	}
	for i, j := range jobs {
		if existing[i] != nil {
			continue
		}
		a.insert(j)
		a.keepKey(j.IdempotencyKey, j.ID, j.UniqueFor)
	}
	return Result{Jobs: jobs, Existing: fresh == 0}
}

// keyHolder is the job an idempotency key names, nil if the key is free
// (never used, its unique_for has passed, or it outlived its job), or a
// conflict if the job was deleted while the key's unique_for still runs.
func (a *applier) keyHolder(key string) (*store.Job, error) {
	id, until, err := a.tx.IdempotencyKey(key)
	if errors.Is(err, store.ErrNotFound) || (until != 0 && until <= a.now) {
		return nil, nil
	}
	a.must(err)
	j, err := a.job(id)
	if err != nil {
		if until != 0 {
			return nil, fmt.Errorf("idempotency_key %q belongs to deleted job %s until %s: %w",
				key, id, time.Unix(0, until).UTC().Format(time.RFC3339), ErrConflict)
		}
		return nil, nil
	}
	return j, nil
}

// keepKey records that an idempotency key (if any) names job id: for
// uniqueFor from now, or while the job is retained if uniqueFor is 0.
func (a *applier) keepKey(key, id string, uniqueFor int64) {
	if key == "" {
		return
	}
	var until int64
	if uniqueFor > 0 {
		until = after(a.now, uniqueFor)
	}
	a.must(a.tx.PutIdempotencyKey(key, id, until))
}

// newJob fills j, a zero Job, with the job nj asks for. It sets fields one
// by one: a composite literal would copy the whole record, zeros and all,
// through the write barrier.
func (a *applier) newJob(j *store.Job, nj *NewJob, id string, seq uint64) {
	j.ID, j.Seq, j.Status, j.CreatedAt = id, seq, store.StatusPending, a.now
	j.Queue = nj.Queue
	if j.Queue == "" {
		j.Queue = DefaultQueue
	}
	j.MaxAttempts = max(nj.MaxAttempts, 1)
	j.RunAt = max(nj.RunAt, a.now)
	j.Command, j.Type, j.Payload, j.Priority = nj.Command, nj.Type, nj.Payload, nj.Priority
	j.Env, j.Metadata = nj.Env, nj.Metadata
	j.IdempotencyKey, j.Timeout, j.Backoff = nj.IdempotencyKey, nj.Timeout, nj.Backoff
	j.Retention, j.UniqueFor = nj.Retention, nj.UniqueFor
	j.Schedule, j.ScheduledFor = nj.Schedule, nj.ScheduledFor
	j.Resources, j.Tags = nj.Resources, nj.Tags
	j.ConcurrencyKey, j.TraceParent = nj.ConcurrencyKey, nj.TraceParent
}

// jobID is the id the FSM gives the job of the given seq, built in one
// allocation.
func jobID(seq uint64) string {
	var b [maxJobID]byte
	return string(appendJobID(b[:0], seq))
}

// maxJobID is the length of the longest generated id.
const maxJobID = len(JobIDPrefix) + 20

func appendJobID(b []byte, seq uint64) []byte {
	return strconv.AppendUint(append(b, JobIDPrefix...), seq, 10)
}

// batchRef parses "$N", a reference to the N-th job of the same batch.
func batchRef(s string) (int, bool) {
	if !strings.HasPrefix(s, "$") {
		return 0, false
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil {
		return -1, true
	}
	return n, true
}

// dedupe drops the repeats of ss, keeping the first of each in order.
func dedupe(ss []string) []string {
	out := ss[:0:0]
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
