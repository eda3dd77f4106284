package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Submission limits and defaults.
const (
	DefaultMaxAttempts = 3
	MaxAttemptsLimit   = 1000
	MaxCommandBytes    = 64 << 10
	MaxPayloadBytes    = 256 << 10
	MaxMapEntries      = 64
	MaxMapKeyBytes     = 128
	MaxMapValueBytes   = 4096
	MaxDependencies    = 1000 // depends_on per job
	// MaxBatchDependencies bounds the depends_on entries of all the jobs of
	// one batch, so one entry adds at most this many edges.
	MaxBatchDependencies = 10_000
	// MaxDependents bounds how many jobs may depend on one job, so that its
	// end changes at most this many dependents in one entry.
	MaxDependents = 10_000
	// MaxQueues bounds the queues of a claim or a worker, MaxTypes the
	// types of a claim; see wire.MaxQueues.
	MaxQueues = wire.MaxQueues
	MaxTypes  = wire.MaxTypes
	// MaxHeartbeatJobs bounds the leases one worker heartbeat lists.
	MaxHeartbeatJobs = 10_000
	MaxKeyBytes      = 256
	MaxPriority      = 1_000_000
)

// DefaultBackoff is the retry policy of jobs that give none.
var DefaultBackoff = store.Backoff{Base: int64(time.Second), Max: int64(time.Hour), Jitter: 0.3}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// validName checks a queue or type name.
func validName(field, s string) error {
	if !namePattern.MatchString(s) {
		return invalid(field, "%q must be 1-128 letters, digits or _ . : -", s)
	}
	return nil
}

// newJob validates a submission and turns it into the command's form; field
// names in errors are prefixed with prefix (e.g. "jobs[3].").
func newJob(req *wire.SubmitRequest, prefix string, now time.Time, retention time.Duration) (fsm.NewJob, error) {
	var nj fsm.NewJob
	f := func(name string) string { return prefix + name }
	switch {
	case req.Command == "" && req.Type == "":
		return nj, invalid(f("command"), "a job needs a command (or a type for a typed handler)")
	case req.Command != "" && req.Type != "":
		return nj, invalid(f("type"), "give a command or a type, not both")
	case len(req.Command) > MaxCommandBytes:
		return nj, invalid(f("command"), "longer than %d bytes", MaxCommandBytes)
	case strings.ContainsRune(req.Command, 0):
		return nj, invalid(f("command"), "must not contain NUL")
	case len(req.Payload) > MaxPayloadBytes:
		return nj, invalid(f("payload"), "larger than %d bytes", MaxPayloadBytes)
	case len(req.Payload) > 0 && !json.Valid(req.Payload):
		return nj, invalid(f("payload"), "is not valid JSON")
	}
	if req.Type != "" {
		if err := validName(f("type"), req.Type); err != nil {
			return nj, err
		}
	}
	maxAtt, err := maxAttempts(req, f)
	if err != nil {
		return nj, err
	}
	queue := req.Queue
	if queue == "" {
		queue = req.QueueName
	}
	if queue == "" {
		queue = fsm.DefaultQueue
	}
	if err := validName(f("queue"), queue); err != nil {
		return nj, err
	}
	if req.Priority > MaxPriority || req.Priority < -MaxPriority {
		return nj, invalid(f("priority"), "must be within ±%d, got %d", MaxPriority, req.Priority)
	}
	if err := checkEnv(f("env"), req.Env); err != nil {
		return nj, err
	}
	if err := checkMap(f("metadata"), req.Metadata); err != nil {
		return nj, err
	}
	res, tags, err := jobNeeds(req, f)
	if err != nil {
		return nj, err
	}
	if len(req.IdempotencyKey) > MaxKeyBytes {
		return nj, invalid(f("idempotency_key"), "longer than %d bytes", MaxKeyBytes)
	}
	if len(req.DependsOn) > MaxDependencies {
		return nj, invalid(f("depends_on"), "more than %d dependencies", MaxDependencies)
	}
	for i, d := range req.DependsOn {
		if d == "" {
			return nj, invalid(fmt.Sprintf("%s[%d]", f("depends_on"), i), "must not be empty")
		}
	}
	var timeout time.Duration
	if req.Timeout != "" {
		if timeout, err = wire.ParseDuration(f("timeout"), req.Timeout); err != nil {
			return nj, invalid("", "%s", err.Error())
		}
	}
	runAt, err := runTime(req, f, now)
	if err != nil {
		return nj, err
	}
	backoff, err := parseBackoff(req.Backoff, f)
	if err != nil {
		return nj, err
	}
	if req.Retention != "" {
		if retention, err = wire.ParseDuration(f("retention"), req.Retention); err != nil {
			return nj, invalid("", "%s", err.Error())
		}
	}
	var uniqueFor time.Duration
	if req.UniqueFor != "" {
		if req.IdempotencyKey == "" {
			return nj, invalid(f("unique_for"), "needs an idempotency_key to be unique")
		}
		if uniqueFor, err = wire.ParseDuration(f("unique_for"), req.UniqueFor); err != nil {
			return nj, invalid("", "%s", err.Error())
		}
	}
	return fsm.NewJob{
		Command:        req.Command,
		Type:           req.Type,
		Payload:        req.Payload,
		Env:            req.Env,
		Metadata:       req.Metadata,
		Queue:          queue,
		Priority:       req.Priority,
		DependsOn:      req.DependsOn,
		MaxAttempts:    maxAtt,
		IdempotencyKey: req.IdempotencyKey,
		Timeout:        int64(timeout),
		Backoff:        backoff,
		RunAt:          runAt,
		Retention:      int64(retention),
		UniqueFor:      int64(uniqueFor),
		Resources:      res,
		Tags:           tags,
	}, nil
}

// maxAttempts reads max_attempts, or the seed's max_retries (same meaning).
func maxAttempts(req *wire.SubmitRequest, f func(string) string) (int, error) {
	n := DefaultMaxAttempts
	switch {
	case req.MaxAttempts != nil && req.MaxRetries != nil && *req.MaxAttempts != *req.MaxRetries:
		return 0, invalid(f("max_retries"), "is the seed's name for max_attempts; give one, or both equal")
	case req.MaxAttempts != nil:
		n = *req.MaxAttempts
	case req.MaxRetries != nil:
		n = *req.MaxRetries
	}
	if n < 1 || n > MaxAttemptsLimit {
		return 0, invalid(f("max_attempts"), "must be between 1 and %d, got %d", MaxAttemptsLimit, n)
	}
	return n, nil
}

func runTime(req *wire.SubmitRequest, f func(string) string, now time.Time) (int64, error) {
	switch {
	case req.RunAt != nil && req.Delay != "":
		return 0, invalid(f("delay"), "give run_at or delay, not both")
	case req.RunAt != nil:
		// UnixNano is defined from 1678 to 2262 only.
		if t := *req.RunAt; t.Year() < 1970 || t.After(now.Add(wire.MaxDuration)) {
			return 0, invalid(f("run_at"), "must be from 1970 to 100 years from now, got %s", t.Format(time.RFC3339))
		}
		return req.RunAt.UnixNano(), nil
	case req.Delay != "":
		d, err := wire.ParseDuration(f("delay"), req.Delay)
		if err != nil {
			return 0, invalid("", "%s", err.Error())
		}
		return now.Add(d).UnixNano(), nil
	}
	return 0, nil
}

func parseBackoff(b *wire.Backoff, f func(string) string) (store.Backoff, error) {
	out := DefaultBackoff
	if b == nil {
		return out, nil
	}
	if b.Base != "" {
		d, err := wire.ParseDuration(f("backoff.base"), b.Base)
		if err != nil {
			return out, invalid("", "%s", err.Error())
		}
		out.Base = int64(d)
	}
	if b.Max != "" {
		d, err := wire.ParseDuration(f("backoff.max"), b.Max)
		if err != nil {
			return out, invalid("", "%s", err.Error())
		}
		out.Max = int64(d)
	}
	if b.Jitter < 0 || b.Jitter > 10 {
		return out, invalid(f("backoff.jitter"), "must be between 0 and 10, got %g", b.Jitter)
	}
	out.Jitter = b.Jitter
	if out.Max < out.Base {
		return out, invalid(f("backoff.max"), "must be at least backoff.base")
	}
	return out, nil
}

// checkEnv checks a job's env: a map within the limits whose every
// variable passes wire.CheckEnvVar. Keys are checked in sorted order, so the
// error names the same one each time.
func checkEnv(field string, env map[string]string) error {
	if err := checkMap(field, env); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if err := wire.CheckEnvVar(field, k, env[k]); err != nil {
			return invalid("", "%s", err.Error())
		}
	}
	return nil
}

func checkMap(field string, m map[string]string) error {
	if len(m) > MaxMapEntries {
		return invalid(field, "more than %d entries", MaxMapEntries)
	}
	for k, v := range m {
		if k == "" || len(k) > MaxMapKeyBytes {
			return invalid(field, "key %.40q must be 1-%d bytes", k, MaxMapKeyBytes)
		}
		if len(v) > MaxMapValueBytes {
			return invalid(field+"."+k, "longer than %d bytes", MaxMapValueBytes)
		}
	}
	return nil
}

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
	}
	if j.Status == store.StatusPending && j.RunAt > now {
		out.Status = wire.StatusScheduled
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
