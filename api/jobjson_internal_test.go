package api

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

// sameAsWriteJSON fails t unless writeJobList writes list exactly as
// writeJSON does.
func sameAsWriteJSON(t *testing.T, list wire.JobList) {
	t.Helper()
	writesAsWriteJSON(t, list, writeJobList)
}

// writesAsWriteJSON fails t unless write writes v exactly as writeJSON
// does.
func writesAsWriteJSON[T any](t *testing.T, v T, write func(http.ResponseWriter, int, T)) {
	t.Helper()
	want, got := httptest.NewRecorder(), httptest.NewRecorder()
	writeJSON(want, 201, v)
	write(got, 201, v)
	if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
		t.Fatalf("status %d %q, writeJSON's %d %q", got.Code, got.Header().Get("Content-Type"), want.Code, want.Header().Get("Content-Type"))
	}
	if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
		t.Fatalf("got:\n%s\nwriteJSON:\n%s", got.Body.Bytes(), want.Body.Bytes())
	}
}

// randomValue sets v (of any wire.Job field's type) to a random value,
// strings among them with characters encoding/json escapes.
func randomValue(rng *rand.Rand, v reflect.Value) {
	strs := []string{"", "a", "echo hi", `q"uote\`, "<b>&amp;</b>", "tab\tnl\n\x01", "é ü 漢", "\u2028", "bad\xffutf8", "x"}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[rng.IntN(len(strs))])
	case reflect.Int, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(rng.Int64N(1e12))
			return
		}
		v.SetInt(rng.Int64N(2_000_001) - 1_000_000)
	case reflect.Uint64:
		v.SetUint(rng.Uint64())
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 1)
	case reflect.Float64:
		// encoding/json writes these with an exponent, refuses NaN.
		edges := []float64{1e-7, -2.5e-9, 1e21, 123456789e20, 1e20, 1e-6, math.Copysign(0, -1), math.NaN()}
		if i := rng.IntN(2 * len(edges)); i < len(edges) {
			v.SetFloat(edges[i])
			return
		}
		v.SetFloat(rng.Float64())
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			raws := []string{`{"a": 1, "b": [1, 2]}`, `"s"`, `123`, `{"html":"<x>&"}`, `[ ]`, "{\"s\":\"\u2028\"}", `null`, "nil", "empty"}
			switch raw := raws[rng.IntN(len(raws))]; raw {
			case "nil": // in a map, null
				v.SetBytes(nil)
			case "empty": // in a map, refused
				v.SetBytes([]byte{})
			default:
				v.SetBytes([]byte(raw))
			}
			return
		}
		n := rng.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			randomValue(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(5) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			randomValue(rng, k)
			randomValue(rng, e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		randomValue(rng, p.Elem())
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			zones := []*time.Location{time.UTC, time.FixedZone("x", 3600), time.FixedZone("y", 0)}
			v.Set(reflect.ValueOf(time.Unix(rng.Int64N(4e11)-2e11, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				randomValue(rng, v.Field(i))
			}
		}
	default:
		panic("randomValue: no case for " + v.Type().String())
	}
}

// TestWriteJobListFieldByField sets each field of wire.Job alone, then
// all of them, to random values and compares writeJobList and writeJob
// with encoding/json: a field
// added to wire.Job that appendJob forgets fails here, and so does one
// that appendJobFast always leaves to encoding/json.
func TestWriteJobListFieldByField(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	typ := reflect.TypeFor[wire.Job]()
	for i := range typ.NumField() {
		fast := 0
		for range 30 {
			var j wire.Job
			randomValue(rng, reflect.ValueOf(&j).Elem().Field(i))
			sameAsWriteJSON(t, wire.JobList{Jobs: []wire.Job{j}})
			writesAsWriteJSON(t, j, writeJob)
			if _, ok := appendJobFast(nil, &j); ok {
				fast++
			}
		}
		if fast == 0 {
			t.Errorf("%s: no value took the fast path", typ.Field(i).Name)
		}
	}
	for range 300 {
		var j, k wire.Job
		randomValue(rng, reflect.ValueOf(&j).Elem())
		randomValue(rng, reflect.ValueOf(&k).Elem())
		var list wire.JobList
		randomValue(rng, reflect.ValueOf(&list).Elem())
		list.Jobs = append(list.Jobs, j, k)
		sameAsWriteJSON(t, list)
		writesAsWriteJSON(t, j, writeJob)
	}
	sameAsWriteJSON(t, wire.JobList{})
	sameAsWriteJSON(t, wire.JobList{Jobs: []wire.Job{}})
	sameAsWriteJSON(t, wire.JobList{Jobs: []wire.Job{}, NextCursor: "12", Scanned: 10000, Partial: true})
	sameAsWriteJSON(t, wire.JobList{Jobs: []wire.Job{}, Scanned: -1})
}

// TestWriteClaimReplyFieldByField does for the reply of a claim what
// TestWriteJobListFieldByField does for job lists: each field of
// wire.ClaimResponse and of its reports alone, then all of them with
// jobs whose every field is set, compared with encoding/json.
func TestWriteClaimReplyFieldByField(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	typ := reflect.TypeFor[wire.ClaimResponse]()
	for i := range typ.NumField() {
		for range 30 {
			var out wire.ClaimResponse
			randomValue(rng, reflect.ValueOf(&out).Elem().Field(i))
			writesAsWriteJSON(t, out, writeClaimReply)
		}
	}
	rtyp := reflect.TypeFor[wire.BatchReportResult]()
	for i := range rtyp.NumField() {
		for range 30 {
			var r wire.BatchReportResult
			randomValue(rng, reflect.ValueOf(&r).Elem().Field(i))
			writesAsWriteJSON(t, wire.ClaimResponse{Jobs: []wire.Job{}, Reports: []wire.BatchReportResult{r}}, writeClaimReply)
		}
	}
	for range 300 {
		var out wire.ClaimResponse
		randomValue(rng, reflect.ValueOf(&out).Elem())
		for range rng.IntN(3) {
			var j wire.Job
			randomValue(rng, reflect.ValueOf(&j).Elem())
			out.Jobs = append(out.Jobs, j)
		}
		writesAsWriteJSON(t, out, writeClaimReply)
	}
	writesAsWriteJSON(t, wire.ClaimResponse{}, writeClaimReply)
	writesAsWriteJSON(t, wire.ClaimResponse{Jobs: []wire.Job{}, LeaseTTLMillis: 30000}, writeClaimReply)
}

// TestWriteClaimReplyOfClaimedJobs: jobs as a claim leases them, one
// retried with its history, progress and parents' results, take the fast
// path and read as encoding/json writes them.
func TestWriteClaimReplyOfClaimedJobs(t *testing.T) {
	now := time.Date(2026, 11, 23, 20, 0, 0, 123456789, time.UTC).UnixNano()
	exit := 1
	jobs := []*store.Job{
		{ID: "j-1", Type: "bench-noop", Status: store.StatusRunning, Queue: "default", Attempts: 1, MaxAttempts: 3, CreatedAt: now, RunAt: now,
			StartedAt: now, WorkerID: "w-1", Lease: 7, LeaseDeadline: now + int64(30*time.Second), Backoff: DefaultBackoff, TraceParent: "00-abc-def-01"},
		{ID: "j-2", Command: "echo 2", Status: store.StatusRunning, Queue: "q", Attempts: 2, MaxAttempts: 3, CreatedAt: now, RunAt: now,
			StartedAt: now, WorkerID: "w-1", Lease: 9, LeaseDeadline: now + int64(30*time.Second), DependsOn: []string{"j-0", "j-00"},
			Backoff:   store.Backoff{Base: int64(time.Second), Max: int64(time.Minute), Jitter: 0.25},
			Resources: store.Resources{VRAMMB: 1024, Slots: 2}, Timeout: int64(time.Minute),
			Progress: &store.Progress{Percent: 40, Message: "half", At: now},
			History:  []store.Attempt{{Attempt: 1, WorkerID: "w-0", Lease: 8, Status: store.StatusFailed, ExitCode: &exit, Error: "boom", Started: now, Ended: now + 1}}},
	}
	out := wire.ClaimResponse{Jobs: toWireList(jobs, now), LeaseTTLMillis: 30000, Reports: []wire.BatchReportResult{
		{JobID: "j-0", Status: wire.StatusDone}, {JobID: "j-9", Error: "stale lease", Code: "stale_lease"}}}
	out.Jobs[1].ParentResults = map[string]json.RawMessage{"j-00": json.RawMessage(`{"n": 2}`), "j-0": json.RawMessage(`[1]`)}
	out.Jobs[1].ParentResultsTruncated, out.Jobs[1].ParentResultsCursor = true, "2"
	for i := range out.Jobs {
		if _, ok := appendJobFast(nil, &out.Jobs[i]); !ok {
			t.Errorf("job %d did not take the fast path", i)
		}
	}
	writesAsWriteJSON(t, out, writeClaimReply)
}

// TestWriteJobListOfSubmittedJobs: jobs as a batch submit shows them take
// the fast path and read as encoding/json writes them.
func TestWriteJobListOfSubmittedJobs(t *testing.T) {
	now := time.Date(2026, 11, 23, 20, 0, 0, 123456789, time.UTC).UnixNano()
	jobs := []*store.Job{
		{ID: "j-1", Command: "echo 1", Status: store.StatusPending, Queue: "default", MaxAttempts: 3, CreatedAt: now, RunAt: now, Backoff: DefaultBackoff,
			Env: map[string]string{"B": "2", "A": "1"}, Metadata: map[string]string{"team": "x"}, TraceParent: "00-abc-def-01"},
		{ID: "j-2", Type: "email", Payload: json.RawMessage(`{"to": "a@b"}`), Status: store.StatusBlocked, Queue: "q", Priority: -5, MaxAttempts: 1,
			CreatedAt: now, RunAt: now + int64(time.Hour), DependsOn: []string{"j-1"}, Backoff: DefaultBackoff, Retention: int64(time.Hour), Tags: []string{"gpu"}},
	}
	list := wire.JobList{Jobs: toWireList(jobs, now), Warnings: []string{`unknown field "jobs[1].priorty"`}}
	for i := range list.Jobs {
		if _, ok := appendJobFast(nil, &list.Jobs[i]); !ok {
			t.Errorf("job %d did not take the fast path", i)
		}
	}
	sameAsWriteJSON(t, list)
}

func BenchmarkWriteJobList(b *testing.B) {
	now := time.Now().UnixNano()
	jobs := make([]*store.Job, 1000)
	for i := range jobs {
		jobs[i] = &store.Job{ID: "j-" + strconv.Itoa(i), Command: "echo " + strconv.Itoa(i), Status: store.StatusPending, Queue: "q", Priority: 1,
			MaxAttempts: 3, CreatedAt: now, RunAt: now, Backoff: DefaultBackoff, Env: map[string]string{"A": "1", "B": "2"},
			Metadata: map[string]string{"m": "x", "n": "y"}, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	}
	list := wire.JobList{Jobs: toWireList(jobs, now)}
	for _, bc := range []struct {
		name  string
		write func(http.ResponseWriter, int, wire.JobList)
	}{
		{"appendJob", writeJobList},
		{"encodingJSON", func(w http.ResponseWriter, status int, l wire.JobList) { writeJSON(w, status, l) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.write(httptest.NewRecorder(), 201, list)
			}
		})
	}
}

// BenchmarkWriteClaimReply writes what a worker with 16 slots gets back
// from a claim that carried 16 reports.
func BenchmarkWriteClaimReply(b *testing.B) {
	now := time.Now().UnixNano()
	out := wire.ClaimResponse{LeaseTTLMillis: 30000}
	for i := range 16 {
		id := "j-" + strconv.Itoa(i)
		j := &store.Job{ID: id, Type: "bench-noop", Status: store.StatusRunning, Queue: "q", Attempts: 1, MaxAttempts: 3,
			CreatedAt: now, RunAt: now, StartedAt: now, WorkerID: "w-1", Lease: uint64(i + 1), LeaseDeadline: now + int64(30*time.Second),
			Backoff: DefaultBackoff, Retention: int64(time.Hour), TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
		out.Jobs = append(out.Jobs, toWire(j, now))
		out.Reports = append(out.Reports, wire.BatchReportResult{JobID: "k-" + strconv.Itoa(i), Status: wire.StatusDone})
	}
	for _, bc := range []struct {
		name  string
		write func(http.ResponseWriter, int, wire.ClaimResponse)
	}{
		{"appendJob", writeClaimReply},
		{"encodingJSON", func(w http.ResponseWriter, status int, out wire.ClaimResponse) { writeJSON(w, status, out) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.write(httptest.NewRecorder(), 200, out)
			}
		})
	}
}
