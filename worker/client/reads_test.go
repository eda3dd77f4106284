package client_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// TestStaleReads: with Config.StaleReads every read asks for the node's
// state as it is (?stale=1), and nothing else does; without it, no request
// does.
func TestStaleReads(t *testing.T) {
	var (
		mu    sync.Mutex
		stale = map[string]string{} // "METHOD path" -> its stale parameter
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stale[r.Method+" "+r.URL.Path] = r.URL.Query().Get("stale")
		mu.Unlock()
		switch {
		case r.URL.Path == "/jobs/next":
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodPost:
			writeJSON(w, http.StatusCreated, wire.Job{ID: "j1"})
		case r.URL.Path == "/jobs":
			writeJSON(w, http.StatusOK, wire.JobList{})
		case r.URL.Path == "/queues":
			writeJSON(w, http.StatusOK, wire.QueueList{})
		case r.URL.Path == "/workers":
			writeJSON(w, http.StatusOK, wire.WorkerList{})
		default:
			writeJSON(w, http.StatusOK, wire.Job{ID: "j1"})
		}
	}))
	t.Cleanup(srv.Close)
	use := func(t *testing.T, cl *client.Client) map[string]string {
		t.Helper()
		mu.Lock()
		clear(stale)
		mu.Unlock()
		ctx := t.Context()
		if _, err := cl.List(ctx, client.ListOptions{Queue: "q"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Get(ctx, "j1"); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Queues(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Workers(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Submit(ctx, wire.SubmitRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Next(ctx, "w1", "", 0); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(stale)
	}

	got := use(t, newClient(t, func(c *client.Config) { c.StaleReads = true }, srv.URL))
	for req, want := range map[string]string{
		"GET /jobs": "1", "GET /jobs/j1": "1", "GET /queues": "1", "GET /workers": "1",
		"POST /jobs": "", "GET /jobs/next": "",
	} {
		if got[req] != want {
			t.Errorf("StaleReads: %s sent stale=%q, want %q", req, got[req], want)
		}
	}
	for req, v := range use(t, newClient(t, nil, srv.URL)) {
		if v != "" {
			t.Errorf("default: %s sent stale=%q, want none", req, v)
		}
	}
}
