package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/worker"
)

// waitFor polls cond every 10ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := poll.True(context.Background(), timeout, 10*time.Millisecond, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// testConfig returns a worker config with short timings for servers.
func testConfig(t *testing.T, servers ...string) worker.Config {
	cfg := worker.DefaultConfig()
	cfg.Servers = servers
	cfg.ID = "w-" + strings.ReplaceAll(t.Name(), "/", "-")
	cfg.PollWait = 200 * time.Millisecond
	cfg.Grace = 5 * time.Second
	cfg.KillGrace = 500 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	return cfg
}

// running is a worker started by startWorker.
type running struct {
	w    *worker.Worker
	stop func() error // cancels Run's context and returns what Run returned
	done <-chan error
}

// startWorker starts a worker built from cfg, after setup (which may
// register handlers) ran on it. The test's cleanup stops it.
func startWorker(t *testing.T, cfg worker.Config, setup func(*worker.Worker)) *running {
	t.Helper()
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var result error
	stopped := false
	stop := func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-done:
		case <-time.After(15 * time.Second):
			result = errors.New("Run did not return within 15s of cancel")
		}
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &running{w: w, stop: stop, done: done}
}

// workerOnFakeServer starts a worker, its config changed by mutate (when
// not nil), against a new fake server, and returns the server.
func workerOnFakeServer(t *testing.T, mutate func(*worker.Config)) *fakeServer {
	t.Helper()
	f := newFakeServer(t)
	cfg := testConfig(t, f.URL)
	if mutate != nil {
		mutate(&cfg)
	}
	startWorker(t, cfg, nil)
	return f
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

func intPtr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
