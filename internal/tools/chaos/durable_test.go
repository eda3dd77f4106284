//go:build unix

package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
)

// TestLeaseTap: the durable worker's transport notes the lease of each job
// a claim reply hands out, by attempt, and passes the reply on whole.
func TestLeaseTap(t *testing.T) {
	reply, _ := json.Marshal(wire.ClaimResponse{Jobs: []wire.Job{{ID: "job-1", Lease: 41, Attempts: 2}, {ID: "job-2", Lease: 42, Attempts: 1}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jobs/claim" {
			_, _ = w.Write(reply)
			return
		}
		_, _ = w.Write([]byte(`{"jobs":[{"id":"job-3","lease":43,"attempts":1}]}`)) // not a claim: not noted
	}))
	defer srv.Close()
	tap := &leaseTap{base: http.DefaultTransport, got: make(map[string]claimedAttempt)}
	hc := &http.Client{Transport: tap}
	for _, path := range []string{"/jobs/claim", "/jobs/job-3"} {
		resp, err := hc.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if path == "/jobs/claim" && string(body) != string(reply) {
			t.Fatalf("the claim reply came through as %s, want %s", body, reply)
		}
	}
	for _, c := range []struct {
		id      string
		attempt int
		want    uint64
	}{{"job-1", 2, 41}, {"job-1", 1, 0}, {"job-2", 1, 42}, {"job-3", 1, 0}} {
		if got := tap.lease(c.id, c.attempt); got != c.want {
			t.Errorf("lease of %s attempt %d = %d, want %d", c.id, c.attempt, got, c.want)
		}
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}
