package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// newServer starts an httptest server on 127.0.0.1 serving mux.
func newServer(t *testing.T, mux http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// closedURL returns the URL of a 127.0.0.1 port nobody listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// newClient builds a Client for servers with a short backoff.
func newClient(t *testing.T, mutate func(*client.Config), servers ...string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Servers = servers
	cfg.Backoff = 5 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, wire.Error{Error: msg, Code: code})
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*client.Config)
		want   string // substring of the error; "" means valid
	}{
		{"Valid", func(c *client.Config) {}, ""},
		{"NoServers", func(c *client.Config) { c.Servers = nil }, "Config.Servers"},
		{"NotHTTP", func(c *client.Config) { c.Servers = []string{"ftp://x"} }, "Config.Servers[0]"},
		{"NoHost", func(c *client.Config) { c.Servers = []string{"http://"} }, "Config.Servers[0]"},
		{"ZeroRounds", func(c *client.Config) { c.Rounds = 0 }, "Config.Rounds must be at least 1"},
		{"NegativeBackoff", func(c *client.Config) { c.Backoff = -1 }, "Config.Backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := client.DefaultConfig()
			cfg.Servers = []string{"http://127.0.0.1:7001"}
			tt.mutate(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSubmit(t *testing.T) {
	var gotAuth, gotReqID string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotReqID = r.Header.Get("Authorization"), r.Header.Get("X-Request-Id")
		var req wire.SubmitRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, 400, "invalid", err.Error())
			return
		}
		status := http.StatusCreated
		if req.IdempotencyKey == "seen" {
			status = http.StatusOK
		}
		writeJSON(w, status, wire.Job{ID: "j1", Command: req.Command, Status: wire.StatusPending})
	})
	srv := newServer(t, mux)
	c := newClient(t, func(cfg *client.Config) { cfg.Token = "s3cret" }, srv.URL)
	ctx := t.Context()

	t.Run("CreatedReturnsTheJob", func(t *testing.T) {
		job, created, err := c.SubmitWithStatus(ctx, wire.SubmitRequest{Command: "true"})
		if err != nil {
			t.Fatal(err)
		}
		if !created || job.ID != "j1" || job.Command != "true" {
			t.Fatalf("got %+v created=%v, want j1 created", job, created)
		}
		if gotAuth != "Bearer s3cret" || gotReqID == "" {
			t.Fatalf("headers: Authorization=%q X-Request-Id=%q", gotAuth, gotReqID)
		}
	})
	t.Run("IdempotencyMatchIsNotCreated", func(t *testing.T) {
		job, created, err := c.SubmitWithStatus(ctx, wire.SubmitRequest{Command: "true", IdempotencyKey: "seen"})
		if err != nil {
			t.Fatal(err)
		}
		if created || job.ID != "j1" {
			t.Fatalf("got %+v created=%v, want j1 not created", job, created)
		}
	})
}

func TestErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "missing":
			writeError(w, 404, "not_found", "job missing not found")
		case "plain":
			http.Error(w, "teapot body", http.StatusTeapot)
		default:
			writeJSON(w, 200, wire.Job{ID: r.PathValue("id")})
		}
	})
	mux.HandleFunc("POST /jobs/{id}/done", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 409, "stale_lease", "lease 3 is not current")
	})
	srv := newServer(t, mux)
	c := newClient(t, nil, srv.URL)
	ctx := t.Context()

	t.Run("NotFoundIsAnAPIError", func(t *testing.T) {
		_, err := c.Get(ctx, "missing")
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" || ae.Message != "job missing not found" {
			t.Fatalf("err = %#v, want APIError 404 not_found", err)
		}
		if !client.IsNotFound(err) || client.IsConflict(err) || !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("IsNotFound/IsConflict wrong for %v", err)
		}
	})
	t.Run("StaleLeaseIsAConflict", func(t *testing.T) {
		_, err := c.Done(ctx, "j1", wire.ReportRequest{Lease: 3})
		if !client.IsConflict(err) || client.StatusOf(err) != 409 {
			t.Fatalf("err = %v, want a conflict", err)
		}
	})
	t.Run("NonJSONBodyBecomesTheMessage", func(t *testing.T) {
		_, err := c.Get(ctx, "plain")
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusTeapot || ae.Code != "" || ae.Message != "teapot body" {
			t.Fatalf("err = %#v", err)
		}
	})
	t.Run("IDsAreEscaped", func(t *testing.T) {
		job, err := c.Get(ctx, "a/b c?d")
		if err != nil {
			t.Fatal(err)
		}
		if job.ID != "a/b c?d" {
			t.Fatalf("server saw id %q", job.ID)
		}
	})
	t.Run("EmptyIDSendsNothing", func(t *testing.T) {
		if _, err := c.Get(ctx, ""); !errors.Is(err, client.ErrEmptyID) {
			t.Fatalf("err = %v, want ErrEmptyID", err)
		}
	})
}

func TestFailover(t *testing.T) {
	var good atomic.Int32
	goodMux := http.NewServeMux()
	goodMux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		good.Add(1)
		writeJSON(w, 200, wire.Job{ID: r.PathValue("id")})
	})
	goodMux.HandleFunc("POST /jobs", func(w http.ResponseWriter, r *http.Request) {
		good.Add(1)
		writeJSON(w, 201, wire.Job{ID: "j1"})
	})
	goodSrv := newServer(t, goodMux)

	var bad atomic.Int32
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			bad.Add(1)
			w.Header().Set("Retry-After", "0")
			writeError(w, code, "no_leader", "no leader")
		}
	}
	reset := func() { good.Store(0); bad.Store(0) }

	t.Run("ClosedPortMovesToTheNextServer", func(t *testing.T) {
		reset()
		c := newClient(t, nil, closedURL(t), goodSrv.URL)
		if _, err := c.Submit(t.Context(), wire.SubmitRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
		if c.Server() != goodSrv.URL {
			t.Fatalf("current server %s, want %s", c.Server(), goodSrv.URL)
		}
	})
	t.Run("Status503IsRetriedForPosts", func(t *testing.T) {
		reset()
		c := newClient(t, nil, newServer(t, status(503)).URL, goodSrv.URL)
		if _, err := c.Submit(t.Context(), wire.SubmitRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
		if bad.Load() != 1 || good.Load() != 1 {
			t.Fatalf("bad=%d good=%d, want 1 and 1", bad.Load(), good.Load())
		}
	})
	t.Run("Status502IsRetriedForGets", func(t *testing.T) {
		reset()
		c := newClient(t, nil, newServer(t, status(502)).URL, goodSrv.URL)
		if _, err := c.Get(t.Context(), "j1"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Status502IsNotRetriedForPosts", func(t *testing.T) {
		reset()
		c := newClient(t, nil, newServer(t, status(502)).URL, goodSrv.URL)
		_, err := c.Submit(t.Context(), wire.SubmitRequest{Command: "true"})
		if !client.IsUnavailable(err) || bad.Load() != 1 || good.Load() != 0 {
			t.Fatalf("err=%v bad=%d good=%d, want one 502 and no retry", err, bad.Load(), good.Load())
		}
		if c.Server() != goodSrv.URL {
			t.Fatalf("the next request should go to %s, goes to %s", goodSrv.URL, c.Server())
		}
	})
	t.Run("BrokenReplyToAPostIsNotRetried", func(t *testing.T) {
		reset()
		c := newClient(t, nil, newServer(t, hangUp(&bad)).URL, goodSrv.URL)
		_, err := c.Submit(t.Context(), wire.SubmitRequest{Command: "true"})
		if err == nil || bad.Load() != 1 || good.Load() != 0 {
			t.Fatalf("err=%v bad=%d good=%d, want an error and no resend", err, bad.Load(), good.Load())
		}
		if c.Server() != goodSrv.URL {
			t.Fatalf("the next request should go to %s, goes to %s", goodSrv.URL, c.Server())
		}
	})
	t.Run("BrokenReplyToAKeyedSubmitIsRetried", func(t *testing.T) {
		reset()
		c := newClient(t, nil, newServer(t, hangUp(&bad)).URL, goodSrv.URL)
		if _, err := c.Submit(t.Context(), wire.SubmitRequest{Command: "true", IdempotencyKey: "k"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("GivesUpAfterTheRounds", func(t *testing.T) {
		reset()
		c := newClient(t, func(cfg *client.Config) { cfg.Rounds = 3 }, newServer(t, status(503)).URL)
		_, err := c.Get(t.Context(), "j1")
		if !client.IsUnavailable(err) || bad.Load() != 3 {
			t.Fatalf("err=%v tries=%d, want unavailable after 3 tries", err, bad.Load())
		}
	})
	t.Run("CancelledContextStopsRetrying", func(t *testing.T) {
		c := newClient(t, func(cfg *client.Config) { cfg.Rounds = 1000; cfg.Backoff = time.Hour }, closedURL(t))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { _, err := c.Get(ctx, "j1"); done <- err }()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Get did not return after cancel")
		}
	})
}

// hangUp answers by closing the connection without a reply.
func hangUp(hits *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

func TestListAndActions(t *testing.T) {
	var mu sync.Mutex
	var query string
	var actions []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		query = r.URL.RawQuery
		mu.Unlock()
		writeJSON(w, 200, wire.JobList{Jobs: []wire.Job{{ID: "j2"}, {ID: "j1"}}, NextCursor: "c2"})
	})
	mux.HandleFunc("POST /jobs/batch", func(w http.ResponseWriter, r *http.Request) {
		var req wire.BatchSubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		var out wire.JobList
		for i := range req.Jobs {
			out.Jobs = append(out.Jobs, wire.Job{ID: req.Jobs[i].Command})
		}
		writeJSON(w, 201, out)
	})
	mux.HandleFunc("POST /jobs/{id}/{action}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		actions = append(actions, r.PathValue("id")+":"+r.PathValue("action"))
		mu.Unlock()
		writeJSON(w, 200, wire.Job{ID: r.PathValue("id"), Status: wire.StatusCancelling})
	})
	mux.HandleFunc("POST /workers/{id}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, wire.WorkerHeartbeatResponse{Renewed: 2, Actions: []wire.JobAction{{JobID: "j1", Action: wire.ActionCancel}}})
	})
	srv := newServer(t, mux)
	c := newClient(t, nil, srv.URL)
	ctx := t.Context()

	t.Run("ListSendsTheFilters", func(t *testing.T) {
		list, err := c.List(ctx, client.ListOptions{Status: "failed", Queue: "q", Limit: 2, Cursor: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Jobs) != 2 || list.NextCursor != "c2" {
			t.Fatalf("list = %+v", list)
		}
		if query != "cursor=c1&limit=2&queue=q&status=failed" {
			t.Fatalf("query = %q", query)
		}
	})
	t.Run("BatchKeepsTheOrder", func(t *testing.T) {
		jobs, err := c.SubmitBatch(ctx, []wire.SubmitRequest{{Command: "a"}, {Command: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 2 || jobs[0].ID != "a" || jobs[1].ID != "b" {
			t.Fatalf("jobs = %+v", jobs)
		}
	})
	t.Run("BatchIDsFromAServerThatAnswersTheJobs", func(t *testing.T) {
		ids, err := c.SubmitBatchIDs(ctx, []wire.SubmitRequest{{Command: "a"}, {Command: "b"}})
		if err != nil || len(ids) != 2 || ids[0] != "a" || ids[1] != "b" {
			t.Fatalf("SubmitBatchIDs = %q, %v; want the ids of the jobs the server answered", ids, err)
		}
	})
	t.Run("CancelRetryAndReportsHitTheirPaths", func(t *testing.T) {
		job, err := c.Cancel(ctx, "j1")
		if err != nil || job.Status != wire.StatusCancelling {
			t.Fatalf("Cancel = %+v, %v", job, err)
		}
		if _, err := c.Retry(ctx, "j1"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.JobHeartbeat(ctx, "j1", 7); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Fail(ctx, "j1", wire.ReportRequest{Lease: 7, Error: "x"}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := strings.Join(actions, ",")
		mu.Unlock()
		if got != "j1:cancel,j1:retry,j1:heartbeat,j1:fail" {
			t.Fatalf("actions = %s", got)
		}
	})
	t.Run("WorkerHeartbeatReturnsActions", func(t *testing.T) {
		hb, err := c.WorkerHeartbeat(ctx, "w1", []wire.JobLease{{JobID: "j1", Lease: 7}})
		if err != nil {
			t.Fatal(err)
		}
		if hb.Renewed != 2 || len(hb.Actions) != 1 || hb.Actions[0].Action != wire.ActionCancel {
			t.Fatalf("heartbeat = %+v", hb)
		}
	})
}

func TestClaimOutlivesTheClientTimeout(t *testing.T) {
	slow := func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(300 * time.Millisecond) // the server's long poll
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		writeJSON(w, 200, wire.ClaimResponse{Jobs: []wire.Job{{ID: "j1", Lease: 9}}, LeaseTTLMillis: 1000})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs/claim", slow)
	mux.HandleFunc("GET /jobs/{id}", slow)
	srv := newServer(t, mux)
	c := newClient(t, func(cfg *client.Config) {
		cfg.HTTPClient = &http.Client{Timeout: 100 * time.Millisecond}
		cfg.Rounds = 1
	}, srv.URL)

	resp, err := c.Claim(t.Context(), wire.ClaimRequest{WorkerID: "w1", Wait: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Jobs) != 1 || resp.Jobs[0].Lease != 9 || resp.LeaseTTLMillis != 1000 {
		t.Fatalf("claim = %+v", resp)
	}
	if _, err := c.Get(t.Context(), "j1"); err == nil {
		t.Fatal("Get outlived the HTTP client's 100ms timeout")
	}
}

func TestWait(t *testing.T) {
	var polls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch n := polls.Add(1); {
		case n == 2:
			writeError(w, 503, "no_leader", "electing") // a failover mid-wait
		case n < 4:
			writeJSON(w, 200, wire.Job{ID: "j1", Status: wire.StatusRunning})
		default:
			writeJSON(w, 200, wire.Job{ID: "j1", Status: wire.StatusDone})
		}
	})
	c := newClient(t, func(cfg *client.Config) { cfg.Rounds = 1 }, newServer(t, mux).URL)
	job, err := c.Wait(t.Context(), "j1", 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != wire.StatusDone || polls.Load() != 4 {
		t.Fatalf("job %+v after %d polls", job, polls.Load())
	}
}

// TestIncompleteReplyIsNeverASuccess: a 2xx reply whose body is empty (what
// a node that stopped mid-request used to send) or cut short is an error
// wrapping ErrIncompleteReply, never a job with an empty id.
func TestIncompleteReplyIsNeverASuccess(t *testing.T) {
	var hits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK) // no body: Content-Length 0
	})
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte(`{"id":"j1","comm`)) // the server stops here
	})
	c := newClient(t, func(cfg *client.Config) { cfg.Rounds = 1 }, newServer(t, mux).URL)

	t.Run("EmptyReplyToASubmit", func(t *testing.T) {
		hits.Store(0)
		job, err := c.Submit(t.Context(), wire.SubmitRequest{Command: "true"})
		if !errors.Is(err, client.ErrIncompleteReply) {
			t.Fatalf("Submit got job %+v, err %v; want ErrIncompleteReply", job, err)
		}
		if hits.Load() != 1 {
			t.Errorf("an unkeyed submit with an unknown outcome was sent %d times, want 1", hits.Load())
		}
	})
	t.Run("TruncatedReplyToAGet", func(t *testing.T) {
		job, err := c.Get(t.Context(), "j1")
		if !errors.Is(err, client.ErrIncompleteReply) {
			t.Fatalf("Get got job %+v, err %v; want ErrIncompleteReply", job, err)
		}
	})
}

func TestHeartbeatJobSendsProgress(t *testing.T) {
	var got atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs/{id}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req wire.HeartbeatRequest
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
		got.Store(r.PathValue("id") + " " + strings.TrimSpace(string(body)))
		if req.Progress != nil && req.Progress.Percent > 100 {
			writeError(w, http.StatusBadRequest, "invalid", "progress.percent: must be from 0 to 100")
			return
		}
		writeJSON(w, http.StatusOK, wire.HeartbeatResponse{Action: wire.ActionCancel})
	})
	c := newClient(t, nil, newServer(t, mux).URL)
	ctx := context.Background()

	hb, err := c.HeartbeatJob(ctx, "j1", wire.HeartbeatRequest{Lease: 7, Progress: &wire.ProgressUpdate{Percent: 40, Message: "rows"}})
	if err != nil {
		t.Fatal(err)
	}
	if hb.Action != wire.ActionCancel {
		t.Fatalf("action = %q, want %q", hb.Action, wire.ActionCancel)
	}
	if want := `j1 {"lease":7,"progress":{"percent":40,"message":"rows"}}`; got.Load() != want {
		t.Fatalf("server got %v, want %s", got.Load(), want)
	}
	if _, err := c.JobHeartbeat(ctx, "j1", 8); err != nil {
		t.Fatal(err)
	}
	if want := `j1 {"lease":8}`; got.Load() != want {
		t.Fatalf("JobHeartbeat sent %v, want %s", got.Load(), want)
	}
	_, err = c.HeartbeatJob(ctx, "j1", wire.HeartbeatRequest{Lease: 7, Progress: &wire.ProgressUpdate{Percent: 101}})
	if !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("percent 101: err = %v, want ErrInvalid", err)
	}
	if _, err := c.HeartbeatJob(ctx, "", wire.HeartbeatRequest{Lease: 7}); !errors.Is(err, client.ErrEmptyID) {
		t.Fatalf("empty id: err = %v, want ErrEmptyID", err)
	}
}
