package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
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

// fieldIn names fields with a prefix: fieldIn("job.")("queue") is "job.queue".
func fieldIn(prefix string) func(name string) string {
	return func(name string) string { return prefix + name }
}

// batchField names the fields of a batch's i-th job ("jobs[3].queue"),
// formatting the prefix only for an error.
func batchField(i int) func(name string) string {
	return func(name string) string { return fmt.Sprintf("jobs[%d].%s", i, name) }
}

// validName checks a queue or type name.
func validName(field, s string) error {
	if !isName(s) {
		return invalid(field, "%q must be 1-128 letters, digits or _ . : -", s)
	}
	return nil
}

// isName says whether s is a queue or type name: 1 to 128 of
// [A-Za-z0-9_.:-]. A loop, not a regexp: each job of a batch asks.
func isName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// newJob validates a submission and turns it into the command's form; f
// names a field in errors (see fieldIn and batchField).
func newJob(req *wire.SubmitRequest, f func(name string) string, now time.Time, retention time.Duration) (fsm.NewJob, error) {
	var nj fsm.NewJob
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
	if req.Type != "" && !isName(req.Type) {
		return nj, validName(f("type"), req.Type)
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
	if !isName(queue) { // f only for the error: it allocates
		return nj, validName(f("queue"), queue)
	}
	if req.Priority > MaxPriority || req.Priority < -MaxPriority {
		return nj, invalid(f("priority"), "must be within ±%d, got %d", MaxPriority, req.Priority)
	}
	if err := checkEnv(f, "env", req.Env); err != nil {
		return nj, err
	}
	if err := checkMap(f, "metadata", req.Metadata); err != nil {
		return nj, err
	}
	res, tags, err := jobNeeds(req, f)
	if err != nil {
		return nj, err
	}
	if len(req.IdempotencyKey) > MaxKeyBytes {
		return nj, invalid(f("idempotency_key"), "longer than %d bytes", MaxKeyBytes)
	}
	if len(req.ConcurrencyKey) > wire.MaxConcurrencyKeyBytes {
		return nj, invalid(f("concurrency_key"), "longer than %d bytes", wire.MaxConcurrencyKeyBytes)
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
		ConcurrencyKey: req.ConcurrencyKey,
	}, nil
}

// queueLimits validates the body of PUT /queues/{name}.
func queueLimits(req *wire.QueueLimits) (store.QueueLimits, error) {
	var l store.QueueLimits
	for _, c := range []struct {
		field string
		v     *int
		to    *int
	}{
		{"concurrency", req.Concurrency, &l.Concurrency},
		{"key_concurrency", req.KeyConcurrency, &l.KeyConcurrency},
		{"burst", req.Burst, &l.Burst},
		{"key_burst", req.KeyBurst, &l.KeyBurst},
	} {
		if c.v == nil {
			continue
		}
		if *c.v < 1 || *c.v > fsm.MaxBurst {
			return l, invalid(c.field, "must be from 1 to %d (leave it out for no limit), got %d", fsm.MaxBurst, *c.v)
		}
		*c.to = *c.v
	}
	var err error
	if l.Rate, err = rateOf("rate", req.Rate); err != nil {
		return l, err
	}
	if l.KeyRate, err = rateOf("key_rate", req.KeyRate); err != nil {
		return l, err
	}
	if len(req.KeyWeights) > fsm.MaxKeyWeights {
		return l, invalid("key_weights", "more than %d keys", fsm.MaxKeyWeights)
	}
	for _, k := range slices.Sorted(maps.Keys(req.KeyWeights)) {
		w := req.KeyWeights[k]
		switch {
		case k == "" || len(k) > wire.MaxConcurrencyKeyBytes:
			return l, invalid("key_weights", "a key must be 1 to %d bytes, got %q", wire.MaxConcurrencyKeyBytes, k)
		case w < 1 || w > fsm.MaxKeyWeight:
			return l, invalid("key_weights", "weight of %q must be from 1 to %d, got %d", k, fsm.MaxKeyWeight, w)
		}
	}
	if len(req.KeyWeights) > 0 {
		l.KeyWeights = maps.Clone(req.KeyWeights)
	}
	if req.MaxPause != "" {
		d, err := time.ParseDuration(req.MaxPause)
		if err != nil || d < time.Millisecond || d > wire.MaxHoldOff {
			return l, invalid("max_pause", "must be a duration from 1ms to %s, got %q", wire.MaxHoldOff, req.MaxPause)
		}
		l.MaxPause = int64(d)
	}
	l.PauseQueue = req.RateLimitPausesQueue
	switch {
	case l.Burst != 0 && l.Rate.IsZero():
		return l, invalid("burst", "is the burst of a rate; give rate too")
	case l.KeyBurst != 0 && l.KeyRate.IsZero():
		return l, invalid("key_burst", "is the burst of a key_rate; give key_rate too")
	}
	return l, nil
}

func rateOf(field, s string) (store.Rate, error) {
	if s == "" {
		return store.Rate{}, nil
	}
	n, per, err := wire.ParseRate(field, s)
	if err != nil {
		return store.Rate{}, invalid("", "%s", err.Error())
	}
	if n > fsm.MaxRateCount {
		return store.Rate{}, invalid(field, "at most %d per period, got %q", fsm.MaxRateCount, s)
	}
	return store.Rate{Count: n, Per: int64(per)}, nil
}

// maxAttempts reads max_attempts, or the v0 worker API's max_retries (same meaning).
func maxAttempts(req *wire.SubmitRequest, f func(string) string) (int, error) {
	n := DefaultMaxAttempts
	switch {
	case req.MaxAttempts != nil && req.MaxRetries != nil && *req.MaxAttempts != *req.MaxRetries:
		return 0, invalid(f("max_retries"), "is the v0 worker API's name for max_attempts; give one, or both equal")
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
// checkEnv checks a job's environment, the field f(name): checkMap's
// bounds, then each variable in the order of their names, so that the
// error names the first bad one. The names are sorted only for an error.
func checkEnv(f func(string) string, name string, env map[string]string) error {
	if err := checkMap(f, name, env); err != nil {
		return err
	}
	bad := false
	for k, v := range env {
		if wire.CheckEnvVar("", k, v) != nil {
			bad = true
			break
		}
	}
	if !bad {
		return nil
	}
	field := f(name)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if err := wire.CheckEnvVar(field, k, env[k]); err != nil {
			return invalid("", "%s", err.Error())
		}
	}
	return nil
}

// checkMap checks the bounds of a map of strings, the field f(name).
func checkMap(f func(string) string, name string, m map[string]string) error {
	if len(m) > MaxMapEntries {
		return invalid(f(name), "more than %d entries", MaxMapEntries)
	}
	for k, v := range m {
		if k == "" || len(k) > MaxMapKeyBytes {
			return invalid(f(name), "key %.40q must be 1-%d bytes", k, MaxMapKeyBytes)
		}
		if len(v) > MaxMapValueBytes {
			return invalid(f(name)+"."+k, "longer than %d bytes", MaxMapValueBytes)
		}
	}
	return nil
}

// checkWorker validates a worker's registration (POST /workers/register).
func checkWorker(w *wire.Worker) error {
	switch {
	case w.ID == "":
		return invalid("id", "must not be empty")
	case len(w.ID) > MaxKeyBytes:
		return invalid("id", "longer than %d bytes", MaxKeyBytes)
	case len(w.Tags) > MaxMapEntries:
		return invalid("tags", "more than %d tags", MaxMapEntries)
	case len(w.Queues) > MaxQueues:
		return invalid("queues", "more than %d queues", MaxQueues)
	}
	if err := checkResources(&w.Resources, fieldName); err != nil {
		return err
	}
	for _, q := range w.Queues {
		if err := validName("queues", q); err != nil {
			return err
		}
	}
	return nil
}

// batchReports validates reports and turns them into commands.
func batchReports(in []wire.BatchReport) ([]*fsm.Report, error) {
	if len(in) == 0 || len(in) > wire.MaxBatchReports {
		return nil, invalid("reports", "must hold 1 to %d reports, got %d", wire.MaxBatchReports, len(in))
	}
	reps := make([]*fsm.Report, len(in))
	for i := range in {
		br := &in[i]
		// Names a field of the report: formatted only for a bad one.
		f := func(s string) string { return fmt.Sprintf("reports[%d].%s", i, s) }
		if br.JobID == "" {
			return nil, invalid(f("job_id"), "must not be empty")
		}
		if br.Status != wire.StatusDone && br.Status != wire.StatusFailed {
			return nil, invalid(f("status"), "must be %q or %q, got %q", wire.StatusDone, wire.StatusFailed, br.Status)
		}
		result, progress, err := reportEnd(f, &br.ReportRequest)
		if err != nil {
			return nil, err
		}
		reps[i] = &fsm.Report{
			JobID: br.JobID, Lease: br.Lease, Success: br.Status == wire.StatusDone,
			ExitCode: br.ExitCode, Output: fsm.TrimOutput(br.Output), Error: fsm.TrimOutput(br.Error),
			Final: br.Retry != nil && !*br.Retry, Draw: draw(), Result: result, Progress: progress,
		}
		if err := holdOff(reps[i], &br.ReportRequest, f); err != nil {
			return nil, err
		}
	}
	return reps, nil
}

// holdOff reads a report's rate_limited_for and snooze_for into r, naming
// a bad field through f.
func holdOff(r *fsm.Report, req *wire.ReportRequest, f func(string) string) error {
	for _, h := range []struct {
		field, v string
		to       *int64
	}{{"rate_limited_for", req.RateLimitedFor, &r.RateLimitedFor}, {"snooze_for", req.SnoozeFor, &r.SnoozeFor}} {
		if h.v == "" {
			continue
		}
		d, err := time.ParseDuration(h.v)
		switch {
		case err != nil:
			return invalid(f(h.field), "%q is not a duration like \"30s\"", h.v)
		case d < time.Millisecond || d > wire.MaxHoldOff:
			return invalid(f(h.field), "must be from 1ms to %s, got %s", wire.MaxHoldOff, h.v)
		case r.Success:
			return invalid(f(h.field), "only a failed attempt is rate-limited or snoozed")
		}
		*h.to = int64(d)
	}
	if r.RateLimitedFor != 0 && r.SnoozeFor != 0 {
		return invalid(f("snooze_for"), "give rate_limited_for or snooze_for, not both")
	}
	return nil
}

// Limits of resource requests.
const (
	// MaxTags is the most tags a job may ask for.
	MaxTags = 32
	// MaxTagBytes is the longest tag.
	MaxTagBytes = 128
	// MaxResource bounds each figure a job asks for or a worker offers
	// (2^40: an exbibyte in MB), so that what a worker's jobs hold adds up
	// without overflowing.
	MaxResource = 1 << 40
)

// checkResources refuses a negative or too large resource figure, naming
// the field through f.
func checkResources(r *wire.Resources, f func(string) string) error {
	for _, v := range []struct {
		name string
		n    int
	}{{"vram_mb", r.VRAMMB}, {"memory_mb", r.MemoryMB}, {"cpu_millis", r.CPUMillis}, {"slots", r.Slots}} {
		if v.n < 0 || v.n > MaxResource {
			return invalid(f("resources."+v.name), "must be from 0 to %d, got %d", MaxResource, v.n)
		}
	}
	return nil
}

// jobNeeds validates what a job asks of its worker. gang_size is refused
// here: only POST /jobs creates gangs, and it clears the field first.
func jobNeeds(req *wire.SubmitRequest, f func(string) string) (store.Resources, []string, error) {
	var res store.Resources
	if req.GangSize != 0 {
		return res, nil, invalid(f("gang_size"), "only POST /jobs creates gangs, one per request")
	}
	if r := req.Resources; r != nil {
		res = store.Resources{VRAMMB: r.VRAMMB, MemoryMB: r.MemoryMB, CPUMillis: r.CPUMillis, Slots: r.Slots}
		if err := checkResources(r, f); err != nil {
			return res, nil, err
		}
	}
	if len(req.Tags) > MaxTags {
		return res, nil, invalid(f("tags"), "more than %d tags", MaxTags)
	}
	for i, t := range req.Tags {
		if t == "" || len(t) > MaxTagBytes {
			return res, nil, invalid(fmt.Sprintf("%s[%d]", f("tags"), i), "must be 1-%d bytes", MaxTagBytes)
		}
	}
	return res, req.Tags, nil
}

// epochParam reads the required ?epoch= of a checkpoint or acknowledgement.
func epochParam(r *http.Request) (uint64, error) {
	v := r.URL.Query().Get("epoch")
	if v == "" {
		return 0, invalid("epoch", "is required: the preemption_epoch the heartbeat gave")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, invalid("epoch", "%q is not a preemption epoch", v)
	}
	return n, nil
}

// claimArgs is a validated claim.
type claimArgs struct {
	cmd  fsm.Claim
	wait time.Duration
	// anyQueue (the v0 worker API's /jobs/next without a queue) re-lists the queues
	// on every wake-up, so a queue created during the wait is seen.
	anyQueue bool
	// reportsDone, if not nil, is closed once the reports the claim
	// carries are answered: until then the claim waits (and may be handed
	// a job) even past wait, since its reply waits for them anyway.
	reportsDone <-chan struct{}
}

// onReports says whether the claim still waits for its reports
// (reportsDone open).
func (a *claimArgs) onReports() bool {
	if a.reportsDone == nil {
		return false
	}
	select {
	case <-a.reportsDone:
		return false
	default:
		return true
	}
}

// claimArgs validates a claim (POST /jobs/claim, or GET /jobs/next's
// query) into its command; the wait is capped by MaxWait.
func (s *Server) claimArgs(req *wire.ClaimRequest) (claimArgs, error) {
	if req.WorkerID == "" {
		return claimArgs{}, invalid("worker_id", "must not be empty")
	}
	if len(req.WorkerID) > MaxKeyBytes {
		return claimArgs{}, invalid("worker_id", "longer than %d bytes", MaxKeyBytes)
	}
	if len(req.Queues) > MaxQueues {
		return claimArgs{}, invalid("queues", "more than %d queues", MaxQueues)
	}
	if len(req.Types) > MaxTypes {
		return claimArgs{}, invalid("types", "more than %d types", MaxTypes)
	}
	for _, q := range req.Queues {
		if err := validName("queues", q); err != nil {
			return claimArgs{}, err
		}
	}
	for _, t := range req.Types {
		if err := validName("types", t); err != nil {
			return claimArgs{}, err
		}
	}
	if req.Max < 0 || req.Max > fsm.MaxClaim {
		return claimArgs{}, invalid("max", "must be between 1 and %d, got %d", fsm.MaxClaim, req.Max)
	}
	var wait time.Duration
	if req.Wait != "" {
		d, err := wire.ParseDuration("wait", req.Wait)
		if err != nil {
			return claimArgs{}, invalid("", "%s", err.Error())
		}
		wait = min(d, s.cfg.MaxWait)
	}
	return claimArgs{
		cmd: fsm.Claim{
			WorkerID: req.WorkerID,
			Queues:   req.Queues,
			Types:    req.Types,
			Shell:    req.Shell,
			Max:      max(req.Max, 1),
			LeaseTTL: int64(s.cfg.LeaseTTL),
		},
		wait: wait,
	}, nil
}
