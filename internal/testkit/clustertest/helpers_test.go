package clustertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
)

// httpClient is the tests' own client; its idle connections are closed when
// each test ends so goleak sees no stray readers.
var httpClient = &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}

// reply is one HTTP answer, read whole.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) String() string {
	return fmt.Sprintf("HTTP %d %s", r.Status, bytes.TrimSpace(r.Body))
}

// send makes one request and fails the test if it gets no reply. body is
// sent as is when it is a string or []byte, JSON-encoded otherwise, and not
// at all when nil. Call it from the test's goroutine; others use try.
func send(tb testing.TB, method, url string, body any) reply {
	tb.Helper()
	r, err := try(method, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// try makes one request, like send, but returns the failure to get a reply.
func try(method, url string, body any) (reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return reply{}, fmt.Errorf("encode body: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read reply: %w", method, url, err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// call sends a request and requires the status. A 503 (no leader; the API
// promises nothing was done) is retried for a few seconds, since short
// Raft timeouts on a loaded machine can cost an election now and then.
func call(tb testing.TB, want int, method, url string, body any) reply {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := send(tb, method, url, body)
		if r.Status == http.StatusServiceUnavailable && want != r.Status && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if r.Status != want {
			tb.Fatalf("%s %s: want HTTP %d, got %s", method, url, want, r)
		}
		return r
	}
}

// decode parses a reply body into a T.
func decode[T any](tb testing.TB, r reply) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		tb.Fatalf("decode %T from %s: %v", v, r, err)
	}
	return v
}

// submit posts a job to node url and returns it.
func submit(tb testing.TB, url string, req any) wire.Job {
	tb.Helper()
	return decode[wire.Job](tb, call(tb, http.StatusCreated, http.MethodPost, url+"/jobs", req))
}

// getJob reads a job through node url (a consistent read).
func getJob(tb testing.TB, url, id string) wire.Job {
	tb.Helper()
	return decode[wire.Job](tb, call(tb, http.StatusOK, http.MethodGet, url+"/jobs/"+id, nil))
}

// waitJob polls a job through node url until cond holds, and returns it.
func waitJob(tb testing.TB, url, id string, timeout time.Duration, cond func(j wire.Job) bool) wire.Job {
	tb.Helper()
	var j wire.Job
	clustertest.WaitFor(tb, timeout, func() error {
		r := send(tb, http.MethodGet, url+"/jobs/"+id, nil)
		if r.Status != http.StatusOK {
			return fmt.Errorf("GET job %s: %s", id, r)
		}
		j = decode[wire.Job](tb, r)
		if !cond(j) {
			return fmt.Errorf("job %s is %s (attempts %d, last_error %q)", id, j.Status, j.Attempts, j.LastError)
		}
		return nil
	})
	return j
}

func statusIs(statuses ...string) func(wire.Job) bool {
	return func(j wire.Job) bool {
		for _, s := range statuses {
			if j.Status == s {
				return true
			}
		}
		return false
	}
}

// newCluster builds a cluster and closes the test client's idle connections
// when the test ends (after the cluster is down).
func newCluster(tb testing.TB, n int, opts ...clustertest.Option) *clustertest.Cluster {
	tb.Helper()
	tb.Cleanup(httpClient.CloseIdleConnections)
	return clustertest.New(tb, n, opts...)
}

// startWorker runs an in-process worker.Worker against every node of c until
// the test ends. mutate may change its config.
func startWorker(tb testing.TB, c *clustertest.Cluster, id string, mutate func(*worker.Config), handlers map[string]worker.HandlerFunc) *worker.Worker {
	tb.Helper()
	cfg := worker.DefaultConfig()
	cfg.Servers = c.URLs()
	cfg.ID = id
	cfg.PollWait = time.Second
	cfg.Grace = 5 * time.Second
	cfg.KillGrace = time.Second
	if os.Getenv("WORKRON_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mutate != nil {
		mutate(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		tb.Fatalf("worker.New: %v", err)
	}
	for typ, h := range handlers {
		w.Handle(typ, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("worker %s: Run: %v", id, err)
		}
	})
	return w
}
