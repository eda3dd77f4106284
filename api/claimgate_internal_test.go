package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/store"
)

// TestClaimThatMayNotWaitWaitsForAClaimInFlight: a job is ready, but as
// many claims are in flight as jobs are ready (one of them may already
// have taken its job: its slot is freed only after its reply). A claim
// that may not wait (wait 0, or one beyond Config.MaxLongPolls) waits for
// a claim in flight to finish and looks again, instead of answering empty
// beside a ready job (it was seen once as a 429 for a claim beyond the cap).
func TestClaimThatMayNotWaitWaitsForAClaimInFlight(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, nil); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	g := &e.srv.claiming
	if !g.Acquire(1) { // a claim in flight holds the only slot
		t.Fatal("the gate refused the first claim")
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/jobs/claim", strings.NewReader(`{"worker_id":"w","shell":true,"wait":"0s"}`)))
		done <- rec
	}()
	// Let the claim find the gate full (it asks for the finished signal
	// first), then free the slot as the claim in flight would.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if asked := g.Watched(); asked || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	g.Release()
	rec := <-done
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"lease"`) {
		t.Fatalf("a claim beside a ready job came back without it: %d %s", rec.Code, rec.Body)
	}
}

// TestLongPollCountsAsHeardWhenItEnds: a worker long-polling an empty
// queue is heard from when its poll ends, not only when it began, so a
// poll longer than the offline window does not make it look silent.
func TestLongPollCountsAsHeardWhenItEnds(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	const wait = 300 * time.Millisecond
	began := time.Now()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/jobs/claim", strings.NewReader(`{"worker_id":"w","shell":true,"wait":"300ms"}`)))
	if rec.Code != http.StatusOK {
		t.Fatalf("claim: %d %s", rec.Code, rec.Body)
	}
	if seen := e.srv.live.LastSeen(&store.Worker{ID: "w"}); seen.Before(began.Add(wait)) {
		t.Fatalf("last seen %v after a poll that began %v and waited %v: the end of the poll was not counted", seen, began, wait)
	}
}
