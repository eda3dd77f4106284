//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestSteps: a running attempt records steps once, under its lease; the
// next attempt's claim says which are recorded (bounded), and reads their
// results; GET /jobs/{id} shows the journal.
func TestSteps(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	claim := func(t *testing.T, e *schedEnv) wire.Job {
		t.Helper()
		var cr wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
			t.Fatalf("claim: %d %+v %d jobs", code, werr, len(cr.Jobs))
		}
		return cr.Jobs[0]
	}
	running := func(t *testing.T) (*schedEnv, wire.Job) {
		e := newSchedEnv(t, start, nil)
		if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true","max_attempts":3,"backoff":{"base":"1s"}}`, nil); code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, werr)
		}
		return e, claim(t, e)
	}
	put := func(e *schedEnv, j wire.Job, key, body string, want int) wire.Error {
		t.Helper()
		code, werr := e.do(http.MethodPut, "/jobs/"+j.ID+"/steps/"+key, body, nil)
		if code != want {
			t.Fatalf("PUT step %s: %d %+v, want %d", key, code, werr, want)
		}
		return werr
	}

	t.Run("TheNextAttemptSeesTheRecordedStepsAndTheirResults", func(t *testing.T) {
		e, j := running(t)
		put(e, j, "charge", fmt.Sprintf(`{"lease":%d,"result":{"id":"ch_1"},"duration_ms":40}`, j.Lease), http.StatusCreated)
		put(e, j, "send%232", fmt.Sprintf(`{"lease":%d,"status":"failed","result":"no such address","attempts":3}`, j.Lease), http.StatusCreated)
		if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/fail", fmt.Sprintf(`{"lease":%d,"error":"crash"}`, j.Lease), nil); code != http.StatusOK {
			t.Fatalf("fail: %d %+v", code, werr)
		}
		e.clock.Add(time.Minute)
		j2 := claim(t, e)
		jr := j2.Journal
		if jr == nil || jr.Count != 2 || jr.Truncated || len(jr.Steps) != 2 || jr.Steps[0].Key != "charge" || jr.Steps[1].Key != "send#2" ||
			jr.Steps[1].Status != wire.StepFailed || jr.Steps[1].Attempts != 3 || jr.Steps[0].Result != nil {
			t.Fatalf("claim's journal %+v", jr)
		}
		var st wire.Step
		if code, werr := e.do(http.MethodGet, "/jobs/"+j.ID+"/steps/charge", nil, &st); code != http.StatusOK ||
			string(st.Result) != `{"id":"ch_1"}` || st.DurationMillis != 40 || st.JobAttempt != 1 || !st.RecordedAt.Equal(start) {
			t.Fatalf("GET step: %d %+v %+v", code, werr, st)
		}
		// The second attempt records once more: the first record stands.
		rec := put(e, j2, "charge", fmt.Sprintf(`{"lease":%d,"result":"other"}`, j2.Lease), http.StatusConflict)
		if rec.Code != wire.CodeStepRecorded {
			t.Fatalf("second record: %+v", rec)
		}
		var got wire.Job
		e.do(http.MethodGet, "/jobs/"+j.ID, nil, &got)
		if got.Journal == nil || got.Journal.Count != 2 || got.Journal.Steps[0].Size != len(`{"id":"ch_1"}`) {
			t.Fatalf("GET /jobs/{id} journal %+v", got.Journal)
		}
	})

	t.Run("ARecordedStepsConflictCarriesIt", func(t *testing.T) {
		e, j := running(t)
		put(e, j, "a", fmt.Sprintf(`{"lease":%d,"result":1}`, j.Lease), http.StatusCreated)
		rec := httptestDo(t, e, http.MethodPut, "/jobs/"+j.ID+"/steps/a", fmt.Sprintf(`{"lease":%d,"result":2}`, j.Lease))
		if rec.Code != wire.CodeStepRecorded || rec.Step == nil || string(rec.Step.Result) != "1" {
			t.Fatalf("409 body %+v", rec)
		}
	})

	t.Run("AStaleAttemptCannotRecord", func(t *testing.T) {
		e, j := running(t)
		werr := put(e, j, "a", fmt.Sprintf(`{"lease":%d}`, j.Lease+1), http.StatusConflict)
		if werr.Code != wire.CodeStaleLease {
			t.Fatalf("stale lease: %+v", werr)
		}
		werr = put(e, j, "a", `{}`, http.StatusBadRequest)
		if !strings.Contains(werr.Error, "lease") {
			t.Fatalf("no lease: %+v", werr)
		}
		if code, _ := e.do(http.MethodGet, "/jobs/"+j.ID+"/steps/a", nil, nil); code != http.StatusNotFound {
			t.Fatalf("a refused step is there: %d", code)
		}
	})

	t.Run("BoundsAreRefusedNamingTheLimit", func(t *testing.T) {
		e, j := running(t)
		big := `"` + strings.Repeat("x", 256<<10) + `"`
		werr := put(e, j, "a", fmt.Sprintf(`{"lease":%d,"result":%s}`, j.Lease, big), http.StatusRequestEntityTooLarge)
		if !strings.Contains(werr.Error, "max_step_result_bytes") {
			t.Fatalf("result too large: %+v", werr)
		}
		werr = put(e, j, strings.Repeat("k", 201), fmt.Sprintf(`{"lease":%d}`, j.Lease), http.StatusBadRequest)
		if !strings.Contains(werr.Error, "step") {
			t.Fatalf("key too long: %+v", werr)
		}
	})

	t.Run("AClaimListsABoundedJournal", func(t *testing.T) {
		e, j := running(t)
		n := wire.MaxClaimJournalSteps + 8
		for i := range n {
			put(e, j, fmt.Sprintf("s%03d", i), fmt.Sprintf(`{"lease":%d}`, j.Lease), http.StatusCreated)
		}
		e.do(http.MethodPost, "/jobs/"+j.ID+"/fail", fmt.Sprintf(`{"lease":%d}`, j.Lease), nil)
		e.clock.Add(time.Minute)
		jr := claim(t, e).Journal
		if jr == nil || jr.Count != n || !jr.Truncated || len(jr.Steps) != wire.MaxClaimJournalSteps {
			t.Fatalf("journal of %d steps in a claim: %+v", n, jr)
		}
		var page wire.StepList
		e.do(http.MethodGet, "/jobs/"+j.ID+"/steps?limit=30", nil, &page)
		if len(page.Steps) != 30 || page.NextCursor == "" || page.Count != n {
			t.Fatalf("first page: %d steps, next %q, count %d", len(page.Steps), page.NextCursor, page.Count)
		}
		var rest wire.StepList
		e.do(http.MethodGet, "/jobs/"+j.ID+"/steps?limit=30&cursor="+page.NextCursor, nil, &rest)
		if len(rest.Steps) != n-30 || rest.NextCursor != "" || rest.Steps[0].Key != "s030" {
			t.Fatalf("second page: %d steps from %+v, next %q", len(rest.Steps), rest.Steps, rest.NextCursor)
		}
	})

	t.Run("AListingWithResultsIsPagedByBytes", func(t *testing.T) {
		e, j := running(t)
		// 30 steps of 200 KiB results: a page of results holds 20 (4,000
		// KiB of the 4 MiB bound), whatever the limit asked.
		n, size := 30, 200<<10
		result := func(i int) string { return `"` + strings.Repeat(string(rune('a'+i%26)), size-2) + `"` }
		for i := range n {
			put(e, j, fmt.Sprintf("s%03d", i), fmt.Sprintf(`{"lease":%d,"result":%s}`, j.Lease, result(i)), http.StatusCreated)
		}
		put(e, j, "t", fmt.Sprintf(`{"lease":%d}`, j.Lease), http.StatusCreated) // a null result
		var got []wire.Step
		pages, cursor := 0, ""
		for {
			var page wire.StepList
			if code, werr := e.do(http.MethodGet, "/jobs/"+j.ID+"/steps?results=1&limit=1000&cursor="+cursor, nil, &page); code != http.StatusOK {
				t.Fatalf("page %d: %d %+v", pages, code, werr)
			}
			pages++
			bytes := 0
			for _, st := range page.Steps {
				bytes += len(st.Result)
			}
			if bytes > wire.MaxStepPageResultBytes || len(page.Steps) == 0 {
				t.Fatalf("page %d: %d steps, %d bytes of results", pages, len(page.Steps), bytes)
			}
			got = append(got, page.Steps...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if pages != 2 || len(got) != n+1 {
			t.Fatalf("%d pages, %d steps; want 2 pages, %d steps", pages, len(got), n+1)
		}
		for i, st := range got[:n] {
			if st.Key != fmt.Sprintf("s%03d", i) || string(st.Result) != result(i) || st.Size != size {
				t.Fatalf("step %d: key %s, %d bytes of result (size %d)", i, st.Key, len(st.Result), st.Size)
			}
		}
		if got[n].Key != "t" || got[n].Result != nil {
			t.Fatalf("last step %+v", got[n])
		}
		// Without ?results, the same listing carries none.
		var plain wire.StepList
		e.do(http.MethodGet, "/jobs/"+j.ID+"/steps?limit=1000", nil, &plain)
		if len(plain.Steps) != n+1 || plain.Steps[0].Result != nil || plain.NextCursor != "" {
			t.Fatalf("listing without results: %d steps, first %d bytes, next %q", len(plain.Steps), len(plain.Steps[0].Result), plain.NextCursor)
		}
		// A page of one step: the bound by count still holds.
		var one wire.StepList
		e.do(http.MethodGet, "/jobs/"+j.ID+"/steps?results=true&limit=1", nil, &one)
		if len(one.Steps) != 1 || string(one.Steps[0].Result) != result(0) || one.NextCursor == "" {
			t.Fatalf("page of one: %d steps, next %q", len(one.Steps), one.NextCursor)
		}
	})

	t.Run("ABadResultsValueIsRefusedNamingIt", func(t *testing.T) {
		e, j := running(t)
		for _, v := range []string{"yes", "2", "TRUE"} {
			code, werr := e.do(http.MethodGet, "/jobs/"+j.ID+"/steps?results="+v, nil, nil)
			if code != http.StatusBadRequest || !strings.Contains(werr.Error, "results") {
				t.Fatalf("results=%s: %d %+v", v, code, werr)
			}
		}
		if code, _ := e.do(http.MethodGet, "/jobs/nosuch/steps?results=1", nil, nil); code != http.StatusNotFound {
			t.Fatalf("results of an unknown job: %d", code)
		}
	})
}

// httptestDo sends a request and decodes its body as a 409 step_recorded.
func httptestDo(t *testing.T, e *schedEnv, method, path, body string) wire.StepRecorded {
	t.Helper()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	var out wire.StepRecorded
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
	return out
}
