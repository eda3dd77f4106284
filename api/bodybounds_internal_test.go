package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// hostileMetadata is a submit whose metadata has n entries: at 60,000,
// issue #28's 870 KB body, 200 of which at once took a node to 1.2 GB.
func hostileMetadata(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"command":"true","metadata":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"key-%05d":"v"`, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// TestBodyBoundStopsAtTheFirstExcess: a submit of 60,000 metadata
// entries is refused while it is scanned, at entry 65, having built none
// of them. Before the scan, json.Unmarshal built the whole map (some
// 120,000 allocations) and the check came after.
func TestBodyBoundStopsAtTheFirstExcess(t *testing.T) {
	body := hostileMetadata(60_000)
	var err error
	allocs := testing.AllocsPerRun(5, func() {
		var req wire.SubmitRequest
		err = decodeJSON(body, &req, 0)
	})
	var be *badRequest
	if !errors.As(err, &be) || be.field != "metadata" || be.reason != fmt.Sprintf("more than %d entries", MaxMapEntries) {
		t.Fatalf("decodeJSON = %v, want 400 metadata: more than %d entries", err, MaxMapEntries)
	}
	if allocs > 20 {
		t.Errorf("refusing it took %.0f allocations, want at most 20 (none per entry)", allocs)
	}
	s := bodyScan{data: body}
	s.value(shapeOf(reflect.TypeFor[wire.SubmitRequest]()))
	if stop, next := s.pos, strings.Index(string(body), fmt.Sprintf(`"key-%05d"`, MaxMapEntries+1)); stop > next {
		t.Errorf("the scan stopped at byte %d, past entry %d at byte %d", stop, MaxMapEntries+2, next)
	}
}

// TestBodyBoundsNameTheField: each bound refuses the body at the first
// excess, naming the field as the checks after decoding do.
func TestBodyBoundsNameTheField(t *testing.T) {
	// list and object hold n items, item with %d the index.
	items := func(n int, item string) string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.ReplaceAll(item, "%d", strconv.Itoa(i))
		}
		return strings.Join(out, ",")
	}
	list := func(n int, item string) string { return "[" + items(n, item) + "]" }
	object := func(n int) string { return "{" + items(n, `"k%d":"v"`) + "}" }
	submit := reflect.TypeFor[wire.SubmitRequest]()
	cases := []struct {
		name   string
		t      reflect.Type
		body   string
		field  string
		reason string
	}{
		{"Metadata", submit, `{"metadata":` + object(MaxMapEntries+1) + `}`, "metadata", "more than 64 entries"},
		{"EnvInCapitals", submit, `{"ENV":` + object(MaxMapEntries+1) + `}`, "env", "more than 64 entries"},
		{"EscapedKey", submit, `{"m\u0065tadata":` + object(MaxMapEntries+1) + `}`, "metadata", "more than 64 entries"},
		{"MetadataGivenTwice", submit, `{"metadata":` + object(40) + `,"metadata":` + object(40) + `}`, "metadata", "more than 64 entries"},
		{"MetadataKey", submit, `{"metadata":{"` + strings.Repeat("k", MaxMapKeyBytes+1) + `":"v"}}`, "metadata", fmt.Sprintf("key %.40q must be 1-128 bytes", strings.Repeat("k", 129))},
		{"MetadataValue", submit, `{"metadata":{"a":"b","k":"` + strings.Repeat("v", MaxMapValueBytes+1) + `"}}`, "metadata.k", "longer than 4096 bytes"},
		{"EscapedValue", submit, `{"env":{"k":"` + strings.Repeat(`\u00e9`, MaxMapValueBytes/2+1) + `"}}`, "env.k", "longer than 4096 bytes"},
		{"DependsOn", submit, `{"depends_on":` + list(MaxDependencies+1, `"job-%d"`) + `}`, "depends_on", "more than 1000 dependencies"},
		{"TagsWithAFoldedS", submit, `{"tag\u017f":` + list(MaxTags+1, `"t%d"`) + `}`, "tags", "more than 32 tags"},
		{"ATag", submit, `{"tags":["a","` + strings.Repeat("t", MaxTagBytes+1) + `"]}`, "tags[1]", "must be 1-128 bytes"},
		{"Command", submit, `{"command":"` + strings.Repeat("x", MaxCommandBytes+1) + `"}`, "command", "longer than 65536 bytes"},
		{"Payload", submit, `{"type":"t","payload":"` + strings.Repeat("x", MaxPayloadBytes) + `"}`, "payload", "larger than 262144 bytes"},
		{"UnknownFields", submit, `{"backoff":` + object(MaxUnknownFields+1) + `}`, "backoff", "more than 64 unknown fields"},
		{"TopLevelUnknownFields", submit, object(MaxUnknownFields + 1), "body", "more than 64 unknown fields"},
		{"Depth", submit, `{"payload":` + strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth) + `}`, "payload", "nested deeper than 100 levels"},
		{"BatchJobs", reflect.TypeFor[wire.BatchSubmitRequest](), `{"jobs":` + list(21, `{"command":"%d"}`) + `}`, "jobs", "at most 20 jobs per batch, got more"},
		{"BatchJobMetadata", reflect.TypeFor[wire.BatchSubmitRequest](), `{"jobs":[{},{"metadata":` + object(MaxMapEntries+1) + `}]}`, "jobs[1].metadata", "more than 64 entries"},
		{"BatchDependencies", reflect.TypeFor[wire.BatchSubmitRequest](), `{"jobs":` + list(MaxBatchDependencies/MaxDependencies+1, `{"depends_on":`+list(MaxDependencies, `"j"`)+`}`) + `}`, "jobs[10].depends_on", "the batch's jobs have more than 10000 dependencies in all"},
		{"ClaimQueues", reflect.TypeFor[wire.ClaimRequest](), `{"queues":` + list(MaxQueues+1, `"q%d"`) + `}`, "queues", "more than 32 queues"},
		{"ClaimTypes", reflect.TypeFor[wire.ClaimRequest](), `{"types":` + list(MaxTypes+1, `"t%d"`) + `}`, "types", "more than 64 types"},
		{"ClaimReports", reflect.TypeFor[wire.ClaimRequest](), `{"reports":` + list(wire.MaxBatchReports+1, `{"job_id":"j%d"}`) + `}`, "reports", "must hold 1 to 1000 reports, got more"},
		{"Reports", reflect.TypeFor[wire.BatchReportRequest](), `{"reports":` + list(wire.MaxBatchReports+1, `{}`) + `}`, "reports", "must hold 1 to 1000 reports, got more"},
		{"WorkerQueues", reflect.TypeFor[wire.Worker](), `{"queues":` + list(MaxQueues+1, `"q%d"`) + `}`, "queues", "more than 32 queues"},
		{"WorkerTags", reflect.TypeFor[wire.Worker](), `{"tags":` + list(MaxMapEntries+1, `"t%d"`) + `}`, "tags", "more than 64 tags"},
		{"HeartbeatLeases", reflect.TypeFor[wire.WorkerHeartbeatRequest](), `{"jobs":` + list(MaxHeartbeatJobs+1, `{"job_id":"j","lease":%d}`) + `}`, "jobs", "more than 10000 leases"},
		{"KeyWeights", reflect.TypeFor[wire.QueueLimits](), `{"key_weights":` + strings.ReplaceAll(object(1001), `"v"`, "1") + `}`, "key_weights", "more than 1000 keys"},
		{"ScheduleJobEnv", reflect.TypeFor[wire.ScheduleRequest](), `{"job":{"env":` + object(MaxMapEntries+1) + `}}`, "job.env", "more than 64 entries"},
		{"AnyOtherList", reflect.TypeFor[wire.JobLease](), `{"progress":{"x":` + list(maxOtherItems+1, "%d") + `}}`, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkBody([]byte(c.body), c.t, 20)
			if c.field == "" {
				if err != nil {
					t.Fatalf("checkBody = %v, want nil", err)
				}
				return
			}
			var be *badRequest
			if !errors.As(err, &be) || be.field != c.field || be.reason != c.reason || be.tooBig {
				t.Fatalf("checkBody = %#v, want 400 %s: %s", err, c.field, c.reason)
			}
		})
	}
	t.Run("AResultIs413", func(t *testing.T) {
		body := `{"reports":[{"job_id":"j","result":"` + strings.Repeat("r", wire.MaxResultBytes) + `"}]}`
		var be *badRequest
		if err := checkBody([]byte(body), reflect.TypeFor[wire.BatchReportRequest](), 0); !errors.As(err, &be) || !be.tooBig || be.field != "reports[0].result" {
			t.Fatalf("checkBody = %#v, want 413 naming reports[0].result", err)
		}
	})
}

// TestBodyBoundsOverHTTP: the bounds answer 400 naming the field on the
// routes, before anything is decoded or proposed.
func TestBodyBoundsOverHTTP(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	before := e.srv.state.Applied()
	for _, c := range []struct{ path, body, field string }{
		{"/jobs", string(hostileMetadata(60_000)), "metadata"},
		{"/jobs/batch", `{"jobs":[` + strings.Repeat(`{},`, DefaultConfig().MaxBatchJobs) + `{}]}`, "jobs"},
		{"/jobs/claim", `{"worker_id":"w","queues":[` + strings.Repeat(`"q",`, 60_000) + `"q"]}`, "queues"},
		{"/schedules", `{"name":"s","cron":"@hourly","job":{"command":"x","metadata":` + string(hostileMetadata(100)[29:]) + "}", "job.metadata"},
	} {
		code, werr := e.do(http.MethodPost, c.path, c.body, nil)
		if code != http.StatusBadRequest || werr.Code != wire.CodeInvalid || !strings.HasPrefix(werr.Error, c.field+":") {
			t.Errorf("POST %s: %d %+v, want 400 invalid naming %s", c.path, code, werr, c.field)
		}
	}
	if after := e.srv.state.Applied(); after != before {
		t.Fatalf("a refused request was proposed: applied index %d, was %d", after, before)
	}
}

// TestBodyBoundsTakeWhatValidationTakes: bodies the routes accept pass the
// scan (the fuzz seeds and the unknown-field bodies).
func TestBodyBoundsTakeWhatValidationTakes(t *testing.T) {
	limits := []string{
		`{"metadata":` + strings.Repeat(" ", 10) + `{}}`,
		`{"env":{"k":"` + strings.Repeat(`\u00e9`, MaxMapValueBytes/2) + `"}}`,
		`{"env":{"k":"` + strings.Repeat(`\ud83d\ude00`, MaxMapValueBytes/4) + `"}}`,
		`{"command":"` + strings.Repeat("\xff", MaxCommandBytes/3) + `"}`,
		`{"payload":` + strings.Repeat("[", MaxJSONDepth-1) + strings.Repeat("]", MaxJSONDepth-1) + `}`,
	}
	for _, body := range append(limits, unknownFieldsBodies...) {
		for _, tp := range []reflect.Type{reflect.TypeFor[wire.SubmitRequest](), reflect.TypeFor[wire.BatchSubmitRequest](), reflect.TypeFor[wire.ScheduleRequest]()} {
			if err := checkBody([]byte(body), tp, 0); err != nil {
				t.Errorf("checkBody(%.60q, %s) = %v, want nil", body, tp, err)
			}
		}
	}
}

// FuzzBodyStringLength: the scan measures a string as encoding/json
// decodes it, so a length bound refuses exactly what the check after
// decoding would.
func FuzzBodyStringLength(f *testing.F) {
	for _, s := range []string{`"abc"`, `"\u00e9\ud83d\ude00"`, `"\ud83d"`, `"\ud83d\u0041"`, "\"\xff\xfe\"", `"\n\t\\\/"`, `"\ud800\udbff"`, "\"\xef\xbf\xbd\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, quoted string) {
		s := bodyScan{data: []byte(quoted)}
		if len(quoted) == 0 || quoted[0] != '"' {
			return
		}
		n, _, ok := s.str()
		var want string
		err := json.Unmarshal([]byte(quoted), &want)
		if ok && s.pos == len(quoted) && err == nil && n != len(want) {
			t.Fatalf("str(%q) = %d bytes, encoding/json decodes %d", quoted, n, len(want))
		}
		if err == nil && !ok {
			t.Fatalf("str(%q) failed; encoding/json decodes it", quoted)
		}
	})
}

// FuzzCheckBody: the scan never panics, and a submit that decodes and
// validates passes it.
func FuzzCheckBody(f *testing.F) {
	for _, s := range unknownFieldsBodies {
		f.Add(s)
	}
	f.Add(`{"command":"x","metadata":{"a":"b"},"env":{"A":"1"},"tags":["t"],"depends_on":["job-1"]}`)
	f.Add(`{"COMMAND":"x","Metadata":{"a":"b"},"metadata":{"c":"d"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		err := checkBody([]byte(body), reflect.TypeFor[wire.SubmitRequest](), 0)
		var req wire.SubmitRequest
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		// Beyond validation: the depth and unknown fields; entries of a map
		// given twice (or a key given twice) are added up.
		newBound := err != nil && (strings.HasSuffix(err.Error(), "levels") || strings.HasSuffix(err.Error(), "unknown fields") ||
			strings.HasSuffix(err.Error(), "entries"))
		if _, verr := newJob(&req, fieldIn(""), time.Now(), 0); verr == nil && err != nil && !newBound {
			t.Fatalf("checkBody(%q) = %v; the submit validates", body, err)
		}
	})
}

// BenchmarkHostileMetadataBody decodes issue #28's submit of 60,000
// metadata entries: as decodeBody did before (json.Unmarshal, then the
// bounds), and as it does now (checkBody first).
//
//	go test ./api -run '^$' -bench HostileMetadataBody -benchmem
func BenchmarkHostileMetadataBody(b *testing.B) {
	body := hostileMetadata(60_000)
	b.Run("UnmarshalThenCheck", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req wire.SubmitRequest
			if json.Unmarshal(body, &req) != nil || checkMap(fieldIn(""), "metadata", req.Metadata) == nil {
				b.Fatal("not refused")
			}
		}
	})
	b.Run("CheckedWhileScanned", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req wire.SubmitRequest
			if decodeJSON(body, &req, 0) == nil {
				b.Fatal("not refused")
			}
		}
	})
}
