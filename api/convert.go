package api

import (
	"time"

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
		Status:         string(j.Status),
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
		StartedAt:      optTime(j.StartedAt),
		DoneAt:         optTime(j.DoneAt),
		WorkerID:       j.WorkerID,
		ExitCode:       j.ExitCode,
		Output:         j.Output,
		LastError:      j.LastError,
		ConcurrencyKey: j.ConcurrencyKey,
	}
	if j.Status == store.StatusPending && j.RunAt > now {
		out.Status = wire.StatusScheduled
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
	out.ExpiresAt = optTime(j.ExpireAt)
	out.Schedule, out.ScheduledFor, out.After = j.Schedule, optTime(j.ScheduledFor), j.After
	needsWire(&out, j)
	progressWire(&out, j)
	if j.Status.Leased() {
		out.Lease = j.Lease
		out.LeaseExpiresAt = optTime(j.LeaseDeadline)
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
