package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
	e.clock.Add(e.srv.live.OfflineAfter() + time.Second)
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

// TestWorkerListPages: GET /workers answers a page at a time: without
// limit the first DefaultWorkerListLimit and a next_cursor (so an old
// client gets a bounded reply), and paging with a limit lists every
// worker exactly once, no page over its limit.
func TestWorkerListPages(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	const n = 250
	for i := range n {
		if code, werr := e.do(http.MethodPost, "/workers/register", fmt.Sprintf(`{"id":"w%03d"}`, i), nil); code != http.StatusCreated {
			t.Fatalf("register %d: %d %+v", i, code, werr)
		}
	}
	var first wire.WorkerList
	if code, werr := e.do(http.MethodGet, "/workers", nil, &first); code != http.StatusOK {
		t.Fatalf("workers: %d %+v", code, werr)
	}
	if len(first.Workers) != DefaultWorkerListLimit || first.NextCursor == "" {
		t.Fatalf("no limit: %d workers, next_cursor %q; want %d and a cursor", len(first.Workers), first.NextCursor, DefaultWorkerListLimit)
	}
	seen := make(map[string]int)
	cursor, pages := "", 0
	for {
		var page wire.WorkerList
		path := "/workers?limit=70"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if code, werr := e.do(http.MethodGet, path, nil, &page); code != http.StatusOK {
			t.Fatalf("%s: %d %+v", path, code, werr)
		}
		if len(page.Workers) > 70 {
			t.Fatalf("page of %d workers, limit 70", len(page.Workers))
		}
		for _, w := range page.Workers {
			seen[w.ID]++
		}
		pages++
		if cursor = page.NextCursor; cursor == "" {
			break
		}
		if pages > n {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != n || pages != 4 {
		t.Fatalf("paged %d distinct workers in %d pages, want %d in 4", len(seen), pages, n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("worker %s listed %d times", id, k)
		}
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "cursor=%21%21"} {
		if code, werr := e.do(http.MethodGet, "/workers?"+q, nil, nil); code != http.StatusBadRequest || werr.Code != wire.CodeInvalid {
			t.Errorf("GET /workers?%s: %d %+v, want 400 invalid", q, code, werr)
		}
	}
}

// TestJobReadReadsNoWorkers: reading a job (GET /jobs/{id}, GET /jobs)
// decodes no worker record, however many workers there are, and still
// says how many active workers serve a pending job's queue.
func TestJobReadReadsNoWorkers(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	const n = 300
	for i := range n {
		if code, werr := e.do(http.MethodPost, "/workers/register", fmt.Sprintf(`{"id":"w%03d","queues":["default"]}`, i), nil); code != http.StatusCreated {
			t.Fatalf("register %d: %d %+v", i, code, werr)
		}
	}
	var pending, running wire.Job
	for _, j := range []*wire.Job{&running, &pending} {
		if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, j); code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, werr)
		}
	}
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w000","shell":true}`, nil); code != http.StatusOK {
		t.Fatalf("claim: %d %+v", code, werr)
	}
	before := e.srv.state.WorkerRecordsRead()
	var got wire.Job
	for _, id := range []string{pending.ID, running.ID} {
		if code, werr := e.do(http.MethodGet, "/jobs/"+id, nil, &got); code != http.StatusOK {
			t.Fatalf("read %s: %d %+v", id, code, werr)
		}
	}
	if code, werr := e.do(http.MethodGet, "/jobs", nil, nil); code != http.StatusOK {
		t.Fatalf("list: %d %+v", code, werr)
	}
	if read := e.srv.state.WorkerRecordsRead() - before; read != 0 {
		t.Errorf("reading jobs decoded %d worker records, want 0", read)
	}
	var p wire.Job
	e.do(http.MethodGet, "/jobs/"+pending.ID, nil, &p)
	if p.WaitingCode != wire.WaitWorker || !strings.Contains(p.Waiting, fmt.Sprintf("active workers serving it: %d", n)) {
		t.Errorf("pending job waits %q %q, want it ready with %d workers serving", p.WaitingCode, p.Waiting, n)
	}
}
