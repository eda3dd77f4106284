package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

// writeJobList writes list as writeJSON does, byte for byte, but encodes
// each job itself (appendJob): the reply of a batch of 1,000 jobs went
// through encoding/json's reflection, and through its check of each
// time's MarshalJSON, for every field of every job. What appendJob cannot
// encode goes to writeJSON whole.
func writeJobList(w http.ResponseWriter, status int, list wire.JobList) {
	b, ok := appendJobs(append(make([]byte, 0, 400*len(list.Jobs)+64), `{"jobs":`...), list.Jobs)
	if !ok {
		writeJSON(w, status, list) // and its answer to what encoding/json refuses
		return
	}
	if list.NextCursor != "" {
		b = appendJSONString(append(b, `,"next_cursor":`...), list.NextCursor)
	}
	if list.Scanned != 0 {
		b = strconv.AppendInt(append(b, `,"scanned":`...), int64(list.Scanned), 10)
	}
	if list.Partial {
		b = append(b, `,"partial":true`...)
	}
	if len(list.Warnings) > 0 {
		b = appendStrings(append(b, `,"warnings":`...), list.Warnings)
	}
	writeEncoded(w, status, b)
}

// writeBatchIDs writes the minimal reply of a batch submit (Prefer:
// return=minimal), 201 and a wire.BatchSubmitIDs of jobs as writeJSON
// would, byte for byte, with the header Preference-Applied: the ids alone
// cost a client a twentieth of the full reply to read (about a dozen
// bytes a job instead of 220 for bench's smallest jobs), and the leader
// a fortieth of its time to write (BenchmarkBatchReply).
func writeBatchIDs(w http.ResponseWriter, jobs []*store.Job, warnings []string) {
	b := append(make([]byte, 0, 24*len(jobs)+64), `{"ids":[`...)
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, j.ID)
	}
	b = append(b, ']')
	if len(warnings) > 0 {
		b = appendStrings(append(b, `,"warnings":`...), warnings)
	}
	w.Header().Set(wire.HeaderPreferenceApplied, wire.PreferMinimal)
	writeEncoded(w, http.StatusCreated, b)
}

// writeClaimReply writes the reply of a claim as writeJSON does, byte for
// byte, its jobs through appendJob: a worker's round trip answered 16
// jobs and the 16 reports it carried through encoding/json's reflection.
// What appendJob cannot encode goes to writeJSON whole.
func writeClaimReply(w http.ResponseWriter, status int, out wire.ClaimResponse) {
	b, ok := appendJobs(append(make([]byte, 0, 512*len(out.Jobs)+64*len(out.Reports)+64), `{"jobs":`...), out.Jobs)
	if !ok {
		writeJSON(w, status, out)
		return
	}
	b = strconv.AppendInt(append(b, `,"lease_ttl_ms":`...), out.LeaseTTLMillis, 10)
	if len(out.Reports) > 0 {
		b = append(b, `,"reports":[`...)
		for i := range out.Reports {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendReportResult(b, &out.Reports[i])
		}
		b = append(b, ']')
	}
	writeEncoded(w, status, b)
}

// writeJob writes j as writeJSON does, byte for byte, through appendJob:
// the v0 worker API's claim (GET /jobs/next) and its reports answer one job each.
func writeJob(w http.ResponseWriter, status int, j wire.Job) {
	b, ok := appendJob(make([]byte, 0, 512), &j)
	if !ok {
		writeJSON(w, status, j)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeEncoded ends b, an encoded JSON object, as json.Encoder does and
// writes it as writeJSON would.
func writeEncoded(w http.ResponseWriter, status int, b []byte) {
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// appendJobs appends jobs as a JSON array (null when nil), or says that
// encoding/json cannot encode one of them.
func appendJobs(b []byte, jobs []wire.Job) ([]byte, bool) {
	if jobs == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendJob(b, &jobs[i]); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

// appendReportResult appends r as encoding/json encodes it.
func appendReportResult(b []byte, r *wire.BatchReportResult) []byte {
	b = appendJSONString(append(b, `{"job_id":`...), r.JobID)
	for _, f := range [...]struct{ key, v string }{{`,"status":`, r.Status}, {`,"error":`, r.Error}, {`,"code":`, r.Code}} {
		if f.v != "" {
			b = appendJSONString(append(b, f.key...), f.v)
		}
	}
	return append(b, '}')
}

// appendJob appends j as encoding/json encodes it, or says that
// encoding/json cannot (a time beyond the year 9999).
func appendJob(b []byte, j *wire.Job) ([]byte, bool) {
	start := len(b)
	b, ok := appendJobFast(b, j)
	if ok {
		return b, true
	}
	enc, err := json.Marshal(j)
	if err != nil {
		return b[:start], false
	}
	return append(b[:start], enc...), true
}

// appendJobFast appends j field by field in wire.Job's order, or says it
// cannot: a value (a payload with characters encoding/json escapes, a
// year beyond 9999, a jitter that is not a number) needs encoding/json's
// own rules.
func appendJobFast(b []byte, j *wire.Job) ([]byte, bool) {
	ok := true
	str := func(key, v string, omitEmpty bool) {
		if v == "" && omitEmpty {
			return
		}
		b = appendJSONString(append(append(b, ','), key...), v)
	}
	num := func(key string, v int64, omitEmpty bool) {
		if v == 0 && omitEmpty {
			return
		}
		b = strconv.AppendInt(append(append(b, ','), key...), v, 10)
	}
	tm := func(key string, t time.Time) {
		if !ok {
			return
		}
		b = append(append(b, ','), key...)
		b, ok = appendJSONTime(b, t)
	}
	optTm := func(key string, t *time.Time) {
		if t != nil {
			tm(key, *t)
		}
	}
	optInt := func(key string, v *int) {
		if v != nil {
			num(key, int64(*v), false)
		}
	}
	raw := func(key string, v json.RawMessage) {
		if len(v) == 0 || !ok {
			return
		}
		b = append(append(b, ','), key...)
		b, ok = appendRawJSON(b, v)
	}
	strs := func(key string, v []string) {
		if len(v) > 0 {
			b = appendStrings(append(append(b, ','), key...), v)
		}
	}
	strMap := func(key string, m map[string]string) {
		if len(m) > 0 {
			b = appendStringMap(append(append(b, ','), key...), m)
		}
	}
	part := func(key string, set bool, add func([]byte) ([]byte, bool)) {
		if set && ok {
			b, ok = add(append(append(b, ','), key...))
		}
	}

	b = appendJSONString(append(b, `{"id":`...), j.ID)
	str(`"command":`, j.Command, true)
	str(`"type":`, j.Type, true)
	raw(`"payload":`, j.Payload)
	strMap(`"env":`, j.Env)
	str(`"status":`, j.Status, false)
	str(`"queue":`, j.Queue, false)
	num(`"priority":`, int64(j.Priority), false)
	num(`"attempts":`, int64(j.Attempts), false)
	num(`"max_attempts":`, int64(j.MaxAttempts), false)
	num(`"max_retries":`, int64(j.MaxRetries), false)
	strs(`"depends_on":`, j.DependsOn)
	str(`"idempotency_key":`, j.IdempotencyKey, true)
	str(`"timeout":`, j.Timeout, true)
	part(`"backoff":`, j.Backoff != nil, func(b []byte) ([]byte, bool) { return appendBackoff(b, j.Backoff) })
	strMap(`"metadata":`, j.Metadata)
	tm(`"created_at":`, j.CreatedAt)
	tm(`"run_at":`, j.RunAt)
	optTm(`"started_at":`, j.StartedAt)
	optTm(`"done_at":`, j.DoneAt)
	str(`"worker_id":`, j.WorkerID, true)
	if j.Lease != 0 {
		b = strconv.AppendUint(append(b, `,"lease":`...), j.Lease, 10)
	}
	optTm(`"lease_expires_at":`, j.LeaseExpiresAt)
	optInt(`"exit_code":`, j.ExitCode)
	str(`"output":`, j.Output, true)
	str(`"last_error":`, j.LastError, true)
	part(`"attempt_history":`, len(j.AttemptHistory) > 0, func(b []byte) ([]byte, bool) { return appendAttempts(b, j.AttemptHistory) })
	str(`"retention":`, j.Retention, true)
	str(`"unique_for":`, j.UniqueFor, true)
	optTm(`"expires_at":`, j.ExpiresAt)
	str(`"schedule":`, j.Schedule, true)
	optTm(`"scheduled_for":`, j.ScheduledFor)
	str(`"after":`, j.After, true)
	part(`"resources":`, j.Resources != nil, func(b []byte) ([]byte, bool) { return appendResources(b, j.Resources), true })
	strs(`"tags":`, j.Tags)
	str(`"gang_id":`, j.GangID, true)
	optInt(`"gang_index":`, j.GangIndex)
	num(`"gang_size":`, int64(j.GangSize), true)
	if j.PreemptionEpoch != 0 {
		b = strconv.AppendUint(append(b, `,"preemption_epoch":`...), j.PreemptionEpoch, 10)
	}
	str(`"unschedulable":`, j.Unschedulable, true)
	str(`"concurrency_key":`, j.ConcurrencyKey, true)
	str(`"traceparent":`, j.TraceParent, true)
	str(`"waiting":`, j.Waiting, true)
	str(`"waiting_code":`, j.WaitingCode, true)
	strs(`"warnings":`, j.Warnings)
	part(`"progress":`, j.Progress != nil, func(b []byte) ([]byte, bool) { return appendProgress(b, j.Progress) })
	raw(`"result":`, j.Result)
	part(`"parent_results":`, len(j.ParentResults) > 0, func(b []byte) ([]byte, bool) { return appendRawMap(b, j.ParentResults) })
	if j.ParentResultsTruncated {
		b = append(b, `,"parent_results_truncated":true`...)
	}
	str(`"parent_results_cursor":`, j.ParentResultsCursor, true)
	part(`"journal":`, j.Journal != nil, func(b []byte) ([]byte, bool) {
		enc, err := json.Marshal(j.Journal)
		return append(b, enc...), err == nil
	})
	part(`"parked":`, j.Parked != nil, func(b []byte) ([]byte, bool) {
		enc, err := json.Marshal(j.Parked)
		return append(b, enc...), err == nil
	})
	return append(b, '}'), ok
}

// appendJSONString appends s as encoding/json encodes a string: printable
// ASCII other than " \ < > & as it is, anything else by encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendStrings(b []byte, v []string) []byte {
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendStringMap appends m with its keys sorted, as encoding/json does.
func appendStringMap(b []byte, m map[string]string) []byte {
	b, _ = appendMap(b, m, func(b []byte, v string) ([]byte, bool) { return appendJSONString(b, v), true })
	return b
}

// appendRawMap appends m as encoding/json does (a nil value is null), or
// says that a value needs encoding/json's rules (see appendRawJSON).
func appendRawMap(b []byte, m map[string]json.RawMessage) ([]byte, bool) {
	return appendMap(b, m, func(b []byte, v json.RawMessage) ([]byte, bool) {
		if v == nil {
			return append(b, "null"...), true
		}
		return appendRawJSON(b, v)
	})
}

// appendMap appends m with its keys sorted, as encoding/json does, each
// value through add, or says that add could not append one.
func appendMap[V any](b []byte, m map[string]V, add func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	var scratch [8]string
	keys := scratch[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = add(append(appendJSONString(b, k), ':'), m[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendBackoff appends bo as encoding/json encodes it, or says it cannot
// (a jitter that is not a finite number).
func appendBackoff(b []byte, bo *wire.Backoff) ([]byte, bool) {
	b = append(b, '{')
	sep := func(key string) {
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(b, key...)
	}
	if bo.Base != "" {
		sep(`"base":`)
		b = appendJSONString(b, bo.Base)
	}
	if bo.Max != "" {
		sep(`"max":`)
		b = appendJSONString(b, bo.Max)
	}
	if bo.Jitter != 0 {
		sep(`"jitter":`)
		var ok bool
		if b, ok = appendJSONFloat(b, bo.Jitter); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendJSONFloat appends f as encoding/json encodes a float64, or says
// that it refuses it (NaN, an infinity).
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-09 as e-9, as encoding/json writes it
		b = b[:n-1]
	}
	return b, true
}

// appendAttempts appends an attempt history as encoding/json encodes it,
// or says it cannot (see appendJSONTime).
func appendAttempts(b []byte, as []wire.Attempt) ([]byte, bool) {
	b = append(b, '[')
	for i := range as {
		a := &as[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"attempt":`...), int64(a.Attempt), 10)
		if a.WorkerID != "" {
			b = appendJSONString(append(b, `,"worker_id":`...), a.WorkerID)
		}
		b = strconv.AppendUint(append(b, `,"lease":`...), a.Lease, 10)
		b = appendJSONString(append(b, `,"status":`...), a.Status)
		if a.ExitCode != nil {
			b = strconv.AppendInt(append(b, `,"exit_code":`...), int64(*a.ExitCode), 10)
		}
		if a.Error != "" {
			b = appendJSONString(append(b, `,"error":`...), a.Error)
		}
		var ok1, ok2 bool
		b, ok1 = appendJSONTime(append(b, `,"started_at":`...), a.Started)
		b, ok2 = appendJSONTime(append(b, `,"ended_at":`...), a.Ended)
		if !ok1 || !ok2 {
			return b, false
		}
		if a.Expired {
			b = append(b, `,"expired":true`...)
		}
		b = append(b, '}')
	}
	return append(b, ']'), true
}

// appendResources appends r as encoding/json encodes it.
func appendResources(b []byte, r *wire.Resources) []byte {
	b = strconv.AppendInt(append(b, `{"vram_mb":`...), int64(r.VRAMMB), 10)
	b = strconv.AppendInt(append(b, `,"memory_mb":`...), int64(r.MemoryMB), 10)
	if r.CPUMillis != 0 {
		b = strconv.AppendInt(append(b, `,"cpu_millis":`...), int64(r.CPUMillis), 10)
	}
	if r.Slots != 0 {
		b = strconv.AppendInt(append(b, `,"slots":`...), int64(r.Slots), 10)
	}
	return append(b, '}')
}

// appendProgress appends p as encoding/json encodes it, or says it cannot
// (see appendJSONTime).
func appendProgress(b []byte, p *wire.Progress) ([]byte, bool) {
	b = strconv.AppendInt(append(b, `{"percent":`...), int64(p.Percent), 10)
	if p.Message != "" {
		b = appendJSONString(append(b, `,"message":`...), p.Message)
	}
	b, ok := appendJSONTime(append(b, `,"at":`...), p.At)
	return append(b, '}'), ok
}

// appendJSONTime appends t as time.Time's MarshalJSON does, for a time in
// UTC (the API's) in the years it encodes (0 to 9999).
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off != 0 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendRawJSON appends a json.RawMessage compacted, as encoding/json does,
// unless it holds what encoding/json would also escape (< > & U+2028
// U+2029) or is not valid.
func appendRawJSON(b []byte, v json.RawMessage) ([]byte, bool) {
	if bytes.ContainsAny(v, "<>&\u2028\u2029") {
		return b, false
	}
	var out bytes.Buffer
	if json.Compact(&out, v) != nil {
		return b, false
	}
	return append(b, out.Bytes()...), true
}
