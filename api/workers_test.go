package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestDeleteWorker: DELETE /workers/{id} forgets an offline worker that
// holds nothing, and refuses an active one, one holding a lease, and an
// unknown one.
func TestDeleteWorker(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	for _, id := range []string{"idle", "busy"} {
		if code, werr := e.do(http.MethodPost, "/workers/register", `{"id":"`+id+`","queues":["default"]}`, nil); code != http.StatusCreated {
			t.Fatalf("register %s: %d %+v", id, code, werr)
		}
	}
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, nil); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"busy","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("claim: %d %+v", code, werr)
	}
	listed := func() map[string]bool {
		var list wire.WorkerList
		if code, werr := e.do(http.MethodGet, "/workers", nil, &list); code != http.StatusOK {
			t.Fatalf("workers: %d %+v", code, werr)
		}
		out := make(map[string]bool)
		for _, w := range list.Workers {
			out[w.ID] = true
		}
		return out
	}

	t.Run("AnActiveWorkerIsRefused", func(t *testing.T) {
		if code, werr := e.do(http.MethodDelete, "/workers/idle", nil, nil); code != http.StatusConflict || werr.Code != wire.CodeConflict {
			t.Fatalf("got %d %+v, want 409", code, werr)
		}
	})
	e.clock.Add(e.srv.cfg.WorkerOfflineAfter + time.Second)
	t.Run("AnOfflineWorkerHoldingALeaseIsRefused", func(t *testing.T) {
		if code, werr := e.do(http.MethodDelete, "/workers/busy", nil, nil); code != http.StatusConflict {
			t.Fatalf("got %d %+v, want 409", code, werr)
		}
	})
	t.Run("AnOfflineIdleWorkerIsForgotten", func(t *testing.T) {
		if code, werr := e.do(http.MethodDelete, "/workers/idle", nil, nil); code != http.StatusNoContent {
			t.Fatalf("got %d %+v, want 204", code, werr)
		}
		if got := listed(); got["idle"] || !got["busy"] {
			t.Errorf("listed after delete: %v", got)
		}
	})
	t.Run("AnUnknownWorker", func(t *testing.T) {
		if code, werr := e.do(http.MethodDelete, "/workers/idle", nil, nil); code != http.StatusNotFound {
			t.Fatalf("got %d %+v, want 404", code, werr)
		}
	})
}
