package client_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// TestSentinelsByStatusAndCode checks that each *Error matches the sentinel
// of its status, and those of its code only for the code.
func TestSentinelsByStatusAndCode(t *testing.T) {
	cases := []struct {
		status int
		code   string
		is     []error
		isNot  []error
	}{
		{400, "invalid", []error{client.ErrInvalid}, []error{client.ErrConflict}},
		{401, "unauthorized", []error{client.ErrUnauthorized}, []error{client.ErrForbidden}},
		{403, "forbidden", []error{client.ErrForbidden}, []error{client.ErrUnauthorized}},
		{404, "not_found", []error{client.ErrNotFound}, []error{client.ErrConflict}},
		{409, "stale_lease", []error{client.ErrConflict, client.ErrStaleLease}, []error{client.ErrStaleEpoch}},
		{409, "stale_epoch", []error{client.ErrConflict, client.ErrStaleEpoch}, []error{client.ErrStaleLease}},
		{409, "conflict", []error{client.ErrConflict}, []error{client.ErrStaleLease, client.ErrStaleEpoch}},
		{413, "too_large", []error{client.ErrTooLarge}, []error{client.ErrInvalid}},
		{429, "overloaded", []error{client.ErrOverloaded}, []error{client.ErrUnavailable}},
		{503, "no_leader", []error{client.ErrUnavailable}, []error{client.ErrOutcomeUnknown}},
		{504, "outcome_unknown", []error{client.ErrUnavailable, client.ErrOutcomeUnknown}, nil},
	}
	for _, tc := range cases {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /jobs/{id}/done", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, tc.status, tc.code, "the server's message")
		})
		c := newClient(t, func(cfg *client.Config) { cfg.Rounds = 1 }, newServer(t, mux).URL)
		_, err := c.Done(t.Context(), "j1", wire.ReportRequest{Lease: 1})
		for _, s := range tc.is {
			if !errors.Is(err, s) {
				t.Errorf("%d %s: %v is not %v", tc.status, tc.code, err, s)
			}
		}
		for _, s := range tc.isNot {
			if errors.Is(err, s) {
				t.Errorf("%d %s: %v is %v", tc.status, tc.code, err, s)
			}
		}
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Message != "the server's message" || client.CodeOf(err) != tc.code {
			t.Errorf("%d %s: %#v does not carry the server's code and message", tc.status, tc.code, err)
		}
	}
}

// TestDoKeepsTheReply checks that Do hands back the status and body of any
// reply, and that Single sends once to one node whatever the reply.
func TestDoKeepsTheReply(t *testing.T) {
	var hits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		writeError(w, http.StatusServiceUnavailable, "no_leader", "no leader")
	})
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":"cut`)) // the server stops here
	})
	srv := newServer(t, mux)
	c := newClient(t, nil, srv.URL, srv.URL)

	resp, err := c.Do(t.Context(), client.Request{Method: http.MethodPost, Path: "/jobs", Body: wire.SubmitRequest{Command: "true"}, Single: true})
	if hits.Load() != 1 || resp.Status != 503 || !client.IsUnavailable(err) || !bytes.Contains(resp.Body, []byte("no_leader")) {
		t.Fatalf("Single Do: %d sends, status %d, body %s, err %v; want one 503 with its body", hits.Load(), resp.Status, resp.Body, err)
	}
	resp, err = c.Do(t.Context(), client.Request{Method: http.MethodGet, Path: "/jobs/j1", Single: true})
	if resp.Status != 409 || !client.IsConflict(err) || !errors.Is(err, client.ErrIncompleteReply) {
		t.Fatalf("a cut error reply: status %d, err %v; want a 409 that is also ErrIncompleteReply", resp.Status, err)
	}
	resp, err = c.Do(t.Context(), client.Request{Method: http.MethodPost, Path: "/jobs", JSON: []byte(`{"command":"true"}`), Single: true})
	if resp.Status != 503 || !client.IsUnavailable(err) || hits.Load() != 2 {
		t.Fatalf("Do with a JSON body: status %d, err %v", resp.Status, err)
	}
	if _, err := c.Do(t.Context(), client.Request{Method: http.MethodGet, Path: "jobs"}); err == nil {
		t.Fatal("Do with a relative path sent it")
	}
}

// TestTLSConfig checks that Config.TLS is the trust of the HTTP client New
// builds.
func TestTLSConfig(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, wire.Job{ID: "j1"})
	}))
	t.Cleanup(srv.Close)
	if _, err := newClient(t, func(cfg *client.Config) { cfg.Rounds = 1 }, srv.URL).Get(t.Context(), "j1"); err == nil {
		t.Fatal("a server whose CA is not trusted answered")
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c := newClient(t, func(cfg *client.Config) { cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12} }, srv.URL)
	if j, err := c.Get(t.Context(), "j1"); err != nil || j.ID != "j1" {
		t.Fatalf("Get over TLS: %+v, %v", j, err)
	}
}

// TestBackupIsNotResentOnceItStreams checks that a backup whose reply
// breaks off is not resent into the same writer.
func TestBackupIsNotResentOnceItStreams(t *testing.T) {
	var hits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /backup", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte("partial"))
	})
	srv := newServer(t, mux)
	c := newClient(t, nil, srv.URL, srv.URL)
	var buf bytes.Buffer
	n, err := c.Backup(t.Context(), &buf)
	if !errors.Is(err, client.ErrIncompleteReply) || hits.Load() != 1 || n != 7 || buf.String() != "partial" {
		t.Fatalf("Backup: %d bytes %q, %d requests, err %v; want one request and ErrIncompleteReply", n, buf.String(), hits.Load(), err)
	}
}

// TestHealthAsksOneNode: Health and Digest skip a server that refuses the
// connection, as every request does, and then give the first node's
// answer, a 503 included, without asking another.
func TestHealthAsksOneNode(t *testing.T) {
	var second atomic.Int32
	sick := http.NewServeMux()
	sick.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, wire.Health{NodeID: "n1", Status: "no_leader"})
	})
	sick.HandleFunc("GET /debug/digest", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "no_leader", "no leader")
	})
	well := http.NewServeMux()
	well.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		second.Add(1)
		writeJSON(w, http.StatusOK, wire.Health{NodeID: "n2", Status: "ok"})
	})
	first, other := newServer(t, sick), newServer(t, well)
	c := newClient(t, nil, closedURL(t), first.URL, other.URL)
	h, err := c.Health(t.Context(), false)
	if h == nil || h.NodeID != "n1" || !client.IsUnavailable(err) || c.Server() != first.URL {
		t.Fatalf("Health = %+v, %v (server %s); want n1's no_leader from %s", h, err, c.Server(), first.URL)
	}
	if _, err := c.Digest(t.Context()); !client.IsUnavailable(err) {
		t.Fatalf("Digest = %v, want n1's 503", err)
	}
	if n := second.Load(); n != 0 {
		t.Errorf("the node after the one that answered was asked %d times", n)
	}
}
