package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// TestWorkerActions: POST /workers/{id}/actions answers a worker's long-poll
// as soon as one of its attempts is cancelled, leaves out the attempts the
// worker names as known, and ends empty when nothing happens.
func TestWorkerActions(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), func(c *Config) { c.MaxLongPolls = 1 })
	if code, werr := e.do(http.MethodPost, "/workers/register", `{"id":"w","queues":["default"]}`, nil); code != http.StatusCreated {
		t.Fatalf("register: %d %+v", code, werr)
	}
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, nil); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("claim: %d %+v", code, werr)
	}
	job := cr.Jobs[0]

	t.Run("AWaitWithNothingToDoEndsEmpty", func(t *testing.T) {
		var out wire.WorkerActionsResponse
		if code, werr := e.do(http.MethodPost, "/workers/w/actions", `{"wait":"10ms"}`, &out); code != http.StatusOK || len(out.Actions) != 0 {
			t.Fatalf("got %d %+v %+v, want 200 with no action", code, out, werr)
		}
	})
	t.Run("BadInputIsRefused", func(t *testing.T) {
		for body, want := range map[string]int{`{"wait":"soon"}`: http.StatusBadRequest, `{"known":{}}`: http.StatusBadRequest} {
			if code, _ := e.do(http.MethodPost, "/workers/w/actions", body, nil); code != want {
				t.Errorf("%s: got %d, want %d", body, code, want)
			}
		}
		if code, werr := e.do(http.MethodPost, "/workers/nobody/actions", `{}`, nil); code != http.StatusNotFound {
			t.Errorf("unknown worker: got %d %+v, want 404", code, werr)
		}
	})
	t.Run("PollsBeyondTheCapAreRefused", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		parked := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/workers/w/actions", strings.NewReader(`{"wait":"1m"}`))
			e.h.ServeHTTP(rec, req)
			parked <- rec.Code
		}()
		poll.Wait(t, 10*time.Second, time.Millisecond, func() error {
			if len(e.srv.watches) != 1 {
				return errors.New("the first poll has not parked")
			}
			return nil
		})
		if code, werr := e.do(http.MethodPost, "/workers/w/actions", `{"wait":"1m"}`, nil); code != http.StatusTooManyRequests {
			t.Errorf("a second poll beyond MaxLongPolls 1: got %d %+v, want 429", code, werr)
		}
		if code, _ := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w","shell":true,"wait":"1ms"}`, nil); code != http.StatusOK {
			t.Errorf("a claim beside the parked poll: got %d, want 200 (claims are counted apart)", code)
		}
		cancel()
		if code := <-parked; code != http.StatusOK {
			t.Errorf("the parked poll ended %d, want 200", code)
		}
	})
	t.Run("ACancelAnswersTheWait", func(t *testing.T) {
		answered := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/workers/w/actions", bytes.NewReader([]byte(`{"wait":"1m"}`))))
			answered <- rec
		}()
		if code, werr := e.do(http.MethodPost, "/jobs/"+job.ID+"/cancel", nil, nil); code != http.StatusOK {
			t.Fatalf("cancel: %d %+v", code, werr)
		}
		rec := <-answered
		var out wire.WorkerActionsResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("got %d %s (%v)", rec.Code, rec.Body, err)
		}
		want := []wire.JobAction{{JobID: job.ID, Lease: job.Lease, Action: wire.ActionCancel}}
		if !slices.Equal(out.Actions, want) {
			t.Fatalf("actions %+v, want %+v", out.Actions, want)
		}
	})
	t.Run("KnownAttemptsAreLeftOut", func(t *testing.T) {
		var out wire.WorkerActionsResponse
		body := wire.WorkerActionsRequest{Known: []wire.JobLease{{JobID: job.ID, Lease: job.Lease}}, Wait: "10ms"}
		if code, werr := e.do(http.MethodPost, "/workers/w/actions", body, &out); code != http.StatusOK || len(out.Actions) != 0 {
			t.Fatalf("got %d %+v %+v, want 200 with no action", code, out, werr)
		}
	})
}
