package api

import (
	"time"

	"github.com/workron/workron/api/jobfilter"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

// toWire shows a stored job through the API. now decides "scheduled".
func toWire(j *store.Job, now int64) wire.Job {
	out := wire.Job{
		ID:             j.ID,
		Command:        j.Command,
		Type:           j.Type,
		Payload:        j.Payload,
		Env:            j.Env,
		Status:         jobfilter.ShownStatus(j, now),
		Queue:          j.Queue,
		Priority:       j.Priority,
		Attempts:       j.Attempts,
		MaxAttempts:    j.MaxAttempts,
		MaxRetries:     j.MaxAttempts,
		DependsOn:      j.DependsOn,
		IdempotencyKey: j.IdempotencyKey,
		Metadata:       j.Metadata,
		CreatedAt:      time.Unix(0, j.CreatedAt).UTC(),
		RunAt:          time.Unix(0, j.RunAt).UTC(),
		WorkerID:       j.WorkerID,
		ExitCode:       j.ExitCode,
		Output:         j.Output,
		LastError:      j.LastError,
		ConcurrencyKey: j.ConcurrencyKey,
		TraceParent:    j.TraceParent,
	}
	if j.Status == store.StatusPending || j.Status == store.StatusBlocked {
		// Waiting again after an attempt (a retry, a lost lease): the
		// store keeps the last attempt's worker and outcome (the FSM's
		// records stay as every version writes them), but they are not
		// current; attempt_history shows them.
		out.WorkerID, out.ExitCode, out.Output, out.LastError = "", nil, "", ""
	}
	if j.Timeout > 0 {
		out.Timeout = time.Duration(j.Timeout).String()
	}
	if j.Backoff != DefaultBackoff {
		out.Backoff = &wire.Backoff{Base: time.Duration(j.Backoff.Base).String(), Max: time.Duration(j.Backoff.Max).String(), Jitter: j.Backoff.Jitter}
	}
	if j.Retention > 0 {
		out.Retention = time.Duration(j.Retention).String()
	}
	if j.UniqueFor > 0 {
		out.UniqueFor = time.Duration(j.UniqueFor).String()
	}
	var leaseDeadline int64
	if j.Status.Leased() {
		out.Lease, leaseDeadline = j.Lease, j.LeaseDeadline
	}
	t := optTimes([...]int64{j.StartedAt, j.DoneAt, j.ExpireAt, j.ScheduledFor, leaseDeadline})
	out.StartedAt, out.DoneAt, out.ExpiresAt, out.ScheduledFor, out.LeaseExpiresAt = t[0], t[1], t[2], t[3], t[4]
	out.Schedule, out.After = j.Schedule, j.After
	needsWire(&out, j)
	progressWire(&out, j)
	if len(j.History) > 0 {
		out.AttemptHistory = make([]wire.Attempt, 0, len(j.History))
	}
	for _, a := range j.History {
		out.AttemptHistory = append(out.AttemptHistory, wire.Attempt{
			Attempt: a.Attempt, WorkerID: a.WorkerID, Lease: a.Lease, Status: string(a.Status),
			ExitCode: a.ExitCode, Error: a.Error, Started: time.Unix(0, a.Started).UTC(), Ended: time.Unix(0, a.Ended).UTC(),
			Expired: a.Expired,
		})
	}
	return out
}

func optTime(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// optTimes is optTime of each of ns, the times in one allocation: a job
// has up to five optional times, and a claimed or finished one two or
// three of them.
func optTimes(ns [5]int64) (out [5]*time.Time) {
	n := 0
	for _, v := range ns {
		if v != 0 {
			n++
		}
	}
	if n == 0 {
		return out
	}
	ts := make([]time.Time, 0, n)
	for i, v := range ns {
		if v != 0 {
			ts = append(ts, time.Unix(0, v).UTC())
			out[i] = &ts[len(ts)-1]
		}
	}
	return out
}

func toWireList(jobs []*store.Job, now int64) []wire.Job {
	out := make([]wire.Job, len(jobs))
	for i, j := range jobs {
		out[i] = toWire(j, now)
	}
	return out
}

// needsWire shows what a job asks of its worker and its place in a gang.
func needsWire(out *wire.Job, j *store.Job) {
	if !j.Resources.IsZero() {
		out.Resources = resourcesWire(j.Resources)
	}
	out.Tags = j.Tags
	if j.GangID != "" {
		i := j.GangIndex
		out.GangID, out.GangIndex, out.GangSize = j.GangID, &i, j.GangSize
	}
	if j.Status == store.StatusRunning {
		out.PreemptionEpoch = j.PreemptEpoch
	}
}

func resourcesWire(r store.Resources) *wire.Resources {
	return &wire.Resources{VRAMMB: r.VRAMMB, MemoryMB: r.MemoryMB, CPUMillis: r.CPUMillis, Slots: r.Slots}
}
