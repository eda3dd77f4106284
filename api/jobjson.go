package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/workron/workron/api/wire"
)

// writeJobList writes list as writeJSON does, byte for byte, but encodes
// each job's common fields itself: the reply of a batch of 1,000 jobs
// went through encoding/json's reflection, and through its check of each
// time's MarshalJSON, for every field of every job. A job with a field
// appendJob does not know (a backoff, resources, attempts, progress) is
// encoded by encoding/json.
func writeJobList(w http.ResponseWriter, status int, list wire.JobList) {
	b := make([]byte, 0, 400*len(list.Jobs)+64)
	b = append(b, `{"jobs":`...)
	if list.Jobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range list.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJob(b, &list.Jobs[i]); !ok {
				writeJSON(w, status, list) // and its answer to what encoding/json refuses
				return
			}
		}
		b = append(b, ']')
	}
	if list.NextCursor != "" {
		b = appendJSONString(append(b, `,"next_cursor":`...), list.NextCursor)
	}
	if len(list.Warnings) > 0 {
		b = appendStrings(append(b, `,"warnings":`...), list.Warnings)
	}
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
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
// cannot: a field it does not encode is set, or a value (a payload with
// characters encoding/json escapes, a year beyond 9999) needs
// encoding/json's own rules.
func appendJobFast(b []byte, j *wire.Job) ([]byte, bool) {
	if j.Backoff != nil || len(j.AttemptHistory) > 0 || j.Resources != nil ||
		j.Progress != nil || len(j.ParentResults) > 0 {
		return b, false
	}
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
	// backoff: not encoded here
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
	// attempt_history: not encoded here
	str(`"retention":`, j.Retention, true)
	str(`"unique_for":`, j.UniqueFor, true)
	optTm(`"expires_at":`, j.ExpiresAt)
	str(`"schedule":`, j.Schedule, true)
	optTm(`"scheduled_for":`, j.ScheduledFor)
	str(`"after":`, j.After, true)
	// resources: not encoded here
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
	// progress: not encoded here
	raw(`"result":`, j.Result)
	// parent_results: not encoded here
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
		b = appendJSONString(b, k)
		b = appendJSONString(append(b, ':'), m[k])
	}
	return append(b, '}')
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
