package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/workron/workron/api/wire"
)

// TestCLIStaleReads: --stale makes the CLI's reads ask for the node's state
// as it is (?stale=1); without it they are consistent (no stale).
func TestCLIStaleReads(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string // each request's "path stale=value"
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" stale="+r.URL.Query().Get("stale"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/jobs" {
			_ = json.NewEncoder(w).Encode(wire.JobList{})
			return
		}
		_ = json.NewEncoder(w).Encode(wire.Job{ID: "j1", Status: wire.StatusPending})
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "get", "j1", "--stale"}, "/jobs/j1 stale=1"},
		{[]string{"jobs", "ls", "--stale"}, "/jobs stale=1"},
		{[]string{"jobs", "get", "j1"}, "/jobs/j1 stale="},
		{[]string{"jobs", "ls"}, "/jobs stale="},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), append(tc.args, "--server", srv.URL), &stdout, &stderr); err != nil {
			t.Fatalf("workron %v: %v\n%s", tc.args, err, stderr.String())
		}
		mu.Lock()
		if len(seen) != 1 || seen[0] != tc.want {
			t.Errorf("workron %v sent %q, want %q", tc.args, seen, tc.want)
		}
		mu.Unlock()
	}
}
