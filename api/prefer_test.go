package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// batchWith POSTs body to /jobs/batch with the Prefer headers (one header
// line each) through the contract-checked handler.
func (e *schedEnv) batchWith(body string, prefer ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/jobs/batch", strings.NewReader(body))
	for _, p := range prefer {
		req.Header.Add(wire.HeaderPrefer, p)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// TestBatchSubmitMinimalReply: with Prefer: return=minimal, POST
// /jobs/batch answers 201 with the created jobs' ids in request order (and
// the warnings), as encoding/json would write them, and says so in
// Preference-Applied; without it the reply is the jobs, as before.
func TestBatchSubmitMinimalReply(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	t.Run("IDsInRequestOrder", func(t *testing.T) {
		rec := env.batchWith(`{"jobs":[{"command":"a","queue":"min"},{"command":"b","queue":"min"},{"command":"c","queue":"min","depends_on":["$0"]}]}`, wire.PreferMinimal)
		if rec.Code != http.StatusCreated || rec.Header().Get(wire.HeaderPreferenceApplied) != wire.PreferMinimal {
			t.Fatalf("HTTP %d, Preference-Applied %q: %s", rec.Code, rec.Header().Get(wire.HeaderPreferenceApplied), rec.Body)
		}
		var out wire.BatchSubmitIDs
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if want := mustEncode(t, out); !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("reply %q, want it as encoding/json writes it: %q", rec.Body, want)
		}
		if len(out.IDs) != 3 || out.Warnings != nil {
			t.Fatalf("ids %q, warnings %q: want 3 ids", out.IDs, out.Warnings)
		}
		for i, cmd := range []string{"a", "b", "c"} {
			var j wire.Job
			if code, werr := env.do(http.MethodGet, "/jobs/"+out.IDs[i], nil, &j); code != http.StatusOK || j.Command != cmd {
				t.Errorf("ids[%d] = %s: %d %+v %q, want the job of command %s", i, out.IDs[i], code, werr, j.Command, cmd)
			}
		}
	})
	t.Run("WarningsStay", func(t *testing.T) {
		rec := env.batchWith(`{"jobs":[{"command":"a","priorty":1}],"extra":1}`, wire.PreferMinimal)
		var out wire.BatchSubmitIDs
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusCreated {
			t.Fatalf("HTTP %d %s: %v", rec.Code, rec.Body, err)
		}
		if want := []string{`unknown field "jobs[0].priorty"`, `unknown field "extra"`}; len(out.IDs) != 1 || !slices.Equal(out.Warnings, want) {
			t.Errorf("ids %q, warnings %q; want one id and %q", out.IDs, out.Warnings, want)
		}
		if want := mustEncode(t, out); !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("reply %q, want %q", rec.Body, want)
		}
	})
	t.Run("WithoutThePreferenceTheJobs", func(t *testing.T) {
		for _, prefer := range [][]string{nil, {"return=representation"}, {"respond-async"}} {
			rec := env.batchWith(`{"jobs":[{"command":"a"},{"command":"b"}]}`, prefer...)
			var list wire.JobList
			if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != http.StatusCreated {
				t.Fatalf("Prefer %q: HTTP %d %s: %v", prefer, rec.Code, rec.Body, err)
			}
			if len(list.Jobs) != 2 || list.Jobs[1].Command != "b" || rec.Header().Get(wire.HeaderPreferenceApplied) != "" {
				t.Errorf("Prefer %q: %s (Preference-Applied %q), want the two jobs", prefer, rec.Body, rec.Header().Get(wire.HeaderPreferenceApplied))
			}
			if want := mustEncode(t, list); !bytes.Equal(rec.Body.Bytes(), want) {
				t.Errorf("Prefer %q: reply %q, want %q", prefer, rec.Body, want)
			}
		}
	})
}

// TestBatchSubmitMinimalReplyOfAResubmit: where an idempotency key matches
// a retained job, the minimal reply names that job, as the full reply
// shows it; the jobs created alongside are new.
func TestBatchSubmitMinimalReplyOfAResubmit(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	var first wire.JobList
	if code, werr := env.do(http.MethodPost, "/jobs/batch", `{"jobs":[{"command":"a","idempotency_key":"k1"},{"command":"b","idempotency_key":"k2"}]}`, &first); code != http.StatusCreated {
		t.Fatalf("first batch: %d %+v", code, werr)
	}
	resubmit := `{"jobs":[{"command":"b","idempotency_key":"k2"},{"command":"c"},{"command":"a","idempotency_key":"k1"}]}`
	rec := env.batchWith(resubmit, wire.PreferMinimal)
	var ids wire.BatchSubmitIDs
	if err := json.Unmarshal(rec.Body.Bytes(), &ids); err != nil || rec.Code != http.StatusCreated {
		t.Fatalf("minimal resubmit: HTTP %d %s: %v", rec.Code, rec.Body, err)
	}
	if len(ids.IDs) != 3 || ids.IDs[0] != first.Jobs[1].ID || ids.IDs[2] != first.Jobs[0].ID || slices.Contains(jobIDs(first.Jobs), ids.IDs[1]) {
		t.Fatalf("minimal resubmit: ids %q, want [%s, a new one, %s]", ids.IDs, first.Jobs[1].ID, first.Jobs[0].ID)
	}
	// The full reply of the same resubmit (c's key-less twin aside).
	var full wire.JobList
	if code, werr := env.do(http.MethodPost, "/jobs/batch", resubmit, &full); code != http.StatusCreated {
		t.Fatalf("full resubmit: %d %+v", code, werr)
	}
	got := jobIDs(full.Jobs)
	if got[0] != ids.IDs[0] || got[2] != ids.IDs[2] || got[1] == ids.IDs[1] {
		t.Errorf("full resubmit: ids %q, minimal %q; want the same existing jobs and a new middle one", got, ids.IDs)
	}
}

// TestBatchSubmitMinimalErrorsUnchanged: a refused batch is answered as
// without the preference, byte for byte and without Preference-Applied,
// and creates nothing (all or nothing), whether the API refuses it or the
// state machine does.
func TestBatchSubmitMinimalErrorsUnchanged(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	for _, body := range []string{
		`{"jobs":[{"command":"a","queue":"bad"},{"queue":"bad"}]}`,                                                           // no command
		`{"jobs":[{"command":"a","queue":"bad"},{"command":"b","queue":"bad","depends_on":["nope"]}]}`,                       // unknown dependency
		`{"jobs":[{"command":"a","queue":"bad","idempotency_key":"k"},{"command":"b","queue":"bad","idempotency_key":"k"}]}`, // the FSM's refusal
		`{"jobs":[]}`,
		`{"jobs":`,
	} {
		plain, minimal := env.batchWith(body), env.batchWith(body, wire.PreferMinimal)
		if plain.Code != http.StatusBadRequest || minimal.Code != plain.Code || !bytes.Equal(minimal.Body.Bytes(), plain.Body.Bytes()) {
			t.Errorf("%s: HTTP %d %s with return=minimal, %d %s without; want the same 400", body, minimal.Code, minimal.Body, plain.Code, plain.Body)
		}
		if h := minimal.Header().Get(wire.HeaderPreferenceApplied); h != "" {
			t.Errorf("%s: an error with Preference-Applied %q", body, h)
		}
	}
	var list wire.JobList
	env.do(http.MethodGet, "/jobs?queue=bad", nil, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("refused batches created %d jobs", len(list.Jobs))
	}
}

// TestCheckContractBatchReplies: the contract check takes both shapes of
// the 201 of POST /jobs/batch, each with its Preference-Applied, and
// refuses the others.
func TestCheckContractBatchReplies(t *testing.T) {
	job, err := json.Marshal(wire.Job{ID: "job-1", Status: "pending", Queue: "default", MaxAttempts: 3, MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	jobs := `{"jobs":[` + string(job) + `]}`
	const m = wire.PreferMinimal
	for _, tc := range []struct {
		name            string
		prefer, applied string
		reply           string
		wantError       bool
	}{
		{"the jobs", "", "", jobs, false},
		{"the ids", m, m, `{"ids":["job-1"]}`, false},
		{"the ids and warnings", m, m, `{"ids":["job-1"],"warnings":["unknown field \"x\""]}`, false},
		{"the jobs to a preference not honoured", m, "", jobs, false},
		{"the ids unasked", "", m, `{"ids":["job-1"]}`, true},
		{"the ids without Preference-Applied", m, "", `{"ids":["job-1"]}`, true},
		{"the jobs with Preference-Applied", m, m, jobs, true},
		{"another preference applied", m, "return=representation", jobs, true},
		{"ids of the wrong type", m, m, `{"ids":[1]}`, true},
		{"both shapes at once", m, m, `{"ids":["job-1"],"jobs":[` + string(job) + `]}`, true},
		{"neither shape", m, m, `{}`, true},
	} {
		rec := &contractRecorder{TB: t}
		req := httptest.NewRequest(http.MethodPost, "/jobs/batch", nil)
		if tc.prefer != "" {
			req.Header.Set(wire.HeaderPrefer, tc.prefer)
		}
		header := http.Header{"Content-Type": {"application/json"}}
		if tc.applied != "" {
			header.Set(wire.HeaderPreferenceApplied, tc.applied)
		}
		CheckContract(rec, req, []byte(`{"jobs":[{"command":"x"}]}`), http.StatusCreated, header, []byte(tc.reply))
		if got := len(rec.errors) > 0; got != tc.wantError {
			t.Errorf("%s: contract errors %q, want some: %v", tc.name, rec.errors, tc.wantError)
		}
	}
}

// TestPrefersMinimal: RFC 7240's grammar as prefersMinimal reads it. Only
// the first return preference counts; what is unknown or unreadable is
// ignored.
func TestPrefersMinimal(t *testing.T) {
	for _, c := range []struct {
		headers []string
		want    bool
	}{
		{[]string{"return=minimal"}, true},
		{[]string{"RETURN=Minimal"}, true},
		{[]string{`return="minimal"`}, true},
		{[]string{"return = minimal"}, true},
		{[]string{"return=minimal; foo=bar"}, true},
		{[]string{"respond-async, wait=10, return=minimal"}, true},
		{[]string{"respond-async", "return=minimal"}, true},
		{[]string{`foo="a;b,c", return=minimal`}, true},
		{[]string{`foo="a\"", return=minimal`}, true},
		{[]string{"handling=lenient,,return=minimal"}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"return=representation"}, false},
		{[]string{"return=representation, return=minimal"}, false},
		{[]string{"return=representation", "return=minimal"}, false},
		{[]string{"return=minimalist"}, false},
		{[]string{"return"}, false},
		{[]string{"returns=minimal"}, false},
		{[]string{"x-return=minimal"}, false},
		{[]string{`foo="a,return=minimal"`}, false},
		{[]string{`foo="unterminated, return=minimal`}, false},
		{[]string{"minimal"}, false},
		{[]string{";;;,,,==="}, false},
	} {
		h := http.Header{}
		for _, v := range c.headers {
			h.Add(wire.HeaderPrefer, v)
		}
		if got := prefersMinimal(h); got != c.want {
			t.Errorf("Prefer %q: minimal %v, want %v", c.headers, got, c.want)
		}
	}
}

// BenchmarkBatchReply writes the reply of a batch of 1,000 jobs, full and
// minimal, and reports its bytes a job.
//
//	go test ./api -run '^$' -bench BatchReply -benchmem
func BenchmarkBatchReply(b *testing.B) {
	const per = 1000
	env := newSchedEnv(b, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	req := wire.SubmitRequest{Command: "true", Queue: "bench"}
	jobs := make([]fsm.NewJob, per)
	for i := range jobs {
		nj, err := newJob(&req, batchField(i), env.clock.Now(), env.srv.cfg.Retention)
		if err != nil {
			b.Fatal(err)
		}
		jobs[i] = nj
	}
	sub, err := env.node.Propose(b.Context(), fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}})
	if err != nil {
		b.Fatal(err)
	}
	res, now := sub.Jobs, env.srv.now()
	for _, minimal := range []bool{false, true} {
		name := "Full"
		if minimal {
			name = "Minimal"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				rec := httptest.NewRecorder()
				if minimal {
					writeBatchIDs(rec, res, nil)
				} else {
					writeJobList(rec, http.StatusCreated, wire.JobList{Jobs: toWireList(res, now)})
				}
				n = rec.Body.Len()
			}
			b.ReportMetric(float64(n)/per, "B/job")
		})
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jobIDs(jobs []wire.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// FuzzPrefer: prefersMinimal reads any header without panicking, and a
// list whose first preference is return=minimal (or return=representation)
// is minimal (or not) whatever follows it.
//
//	go test -run='^$' -fuzz='^FuzzPrefer$' -fuzztime=1m ./api
func FuzzPrefer(f *testing.F) {
	for _, s := range []string{"", "return=minimal", `a="b,c\"`, "respond-async; x=1, return=minimal", ";,=\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		prefersMinimal(http.Header{wire.HeaderPrefer: {s}})
		if !prefersMinimal(http.Header{wire.HeaderPrefer: {"return=minimal, " + s}}) {
			t.Errorf("return=minimal, %q: not minimal", s)
		}
		if prefersMinimal(http.Header{wire.HeaderPrefer: {"return=representation", s}}) {
			t.Errorf("return=representation then %q: minimal", s)
		}
	})
}
