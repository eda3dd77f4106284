package worker_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/proctest"
	"github.com/workron/workron/worker"
)

// causeRecorder is a handler that runs until its context ends or release
// closes, and records the context's cause.
type causeRecorder struct {
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	ended   bool
	cause   error
}

func newCauseRecorder() *causeRecorder {
	return &causeRecorder{started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (c *causeRecorder) handle(ctx context.Context, _ *worker.Job) error {
	c.started <- struct{}{}
	select {
	case <-ctx.Done():
	case <-c.release:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if ctx.Err() != nil {
		c.cause = context.Cause(ctx)
		return ctx.Err()
	}
	return nil
}

func (c *causeRecorder) result() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended, c.cause
}

func TestLeaseLostWhenHeartbeatsFailPastTTL(t *testing.T) {
	for _, code := range []struct {
		name   string
		status int
		code   string
	}{
		{"Unavailable", http.StatusServiceUnavailable, wire.CodeNoLeader},
		{"StaleLease", http.StatusConflict, wire.CodeStaleLease},
	} {
		t.Run(code.name, func(t *testing.T) {
			f := newFakeServer(t)
			h := newCauseRecorder()
			r := startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) { w.Handle("hold", h.handle) })
			id := f.add(wire.Job{Type: "hold"})
			<-h.started
			_, before := f.counts()
			f.failBeats(1<<30, code.status, code.code)
			waitFor(t, 10*time.Second, "the handler to end", func() bool { ended, _ := h.result(); return ended })
			_, beats := f.counts()
			_, cause := h.result()
			if !errors.Is(cause, worker.ErrLeaseLost) {
				t.Fatalf("handler's context cause = %v, want ErrLeaseLost", cause)
			}
			if code.code == wire.CodeStaleLease && beats-before != 1 {
				// Heartbeats go every third of the TTL: a stop that
				// waited for the TTL would come after three of them.
				t.Fatalf("stopped after %d refused heartbeats, want at the first", beats-before)
			}
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			if reps := f.reportsOf(id); len(reps) != 0 {
				t.Fatalf("reports of an attempt whose lease was lost: %+v", reps)
			}
		})
	}
}

func TestHeartbeatsFailingForLessThanTTLDoNotStopTheJob(t *testing.T) {
	f := newFakeServer(t)
	h := newCauseRecorder()
	startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) { w.Handle("hold", h.handle) })
	id := f.add(wire.Job{Type: "hold"})
	<-h.started
	_, before := f.counts()
	f.failBeats(1, http.StatusServiceUnavailable, wire.CodeNoLeader)
	// Six heartbeats after the failed one span two TTLs (one each third):
	// well past the end of the lease the claim gave.
	waitFor(t, 10*time.Second, "heartbeats after the failed one", func() bool {
		_, beats := f.counts()
		return beats-before >= 7
	})
	if ended, cause := h.result(); ended {
		t.Fatalf("handler stopped (cause %v) although its lease was renewed", cause)
	}
	close(h.release)
	if rep := f.waitReport(t, id); rep.Kind != "done" {
		t.Fatalf("report = %+v, want done", rep)
	}
}

func TestLeaseLostStopsAShellJob(t *testing.T) {
	f := newFakeServer(t)
	r := startWorker(t, testConfig(t, f.URL), nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	id := f.add(wire.Job{Command: "sleep 30 & echo $! > " + pidFile + "; sleep 30"})
	var pid int
	waitFor(t, 10*time.Second, "the job to start", func() bool {
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil
	})
	f.failBeats(1<<30, http.StatusServiceUnavailable, wire.CodeNoLeader)
	waitFor(t, 10*time.Second, "the job's process group to die", func() bool { return proctest.Gone(pid) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if reps := f.reportsOf(id); len(reps) != 0 {
		t.Fatalf("reports of an attempt whose lease was lost: %+v", reps)
	}
}

// TestLeaseLostWhenAHeartbeatNamesIt: a heartbeat whose reply names the
// attempt's lease lost (the job was reaped, or moved on to another
// attempt) stops the handler at once with ErrLeaseLost; the worker reports
// nothing for it and leaves it out of its later heartbeats while the
// handler takes its time to return.
func TestLeaseLostWhenAHeartbeatNamesIt(t *testing.T) {
	for _, c := range []struct {
		name string
		lose func(f *fakeServer, id string) int
	}{
		{"Reaped", (*fakeServer).reap},
		{"MovedOn", (*fakeServer).steal},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t)
			started, stopped, release := make(chan struct{}, 1), make(chan error, 1), make(chan struct{})
			r := startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
				w.Handle("hold", func(ctx context.Context, _ *worker.Job) error {
					started <- struct{}{}
					<-ctx.Done()
					stopped <- context.Cause(ctx)
					<-release // slow to stop
					return ctx.Err()
				})
			})
			letGo := sync.OnceFunc(func() { close(release) })
			t.Cleanup(letGo) // before the worker's stop, should the test fail
			id := f.add(wire.Job{Type: "hold"})
			<-started
			lease := f.job(id).Lease
			before := c.lose(f, id)
			var cause error
			select {
			case cause = <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler was not stopped")
			}
			if !errors.Is(cause, worker.ErrLeaseLost) {
				t.Fatalf("handler's context cause = %v, want ErrLeaseLost", cause)
			}
			if _, beats := f.counts(); beats-before != 1 {
				// Heartbeats go every third of the TTL: a stop that
				// waited for the TTL would come after three of them.
				t.Fatalf("stopped after %d heartbeats, want at the first", beats-before)
			}
			// Two more heartbeats while the handler is still stopping.
			waitFor(t, 10*time.Second, "two more heartbeats", func() bool { _, beats := f.counts(); return beats-before >= 3 })
			letGo()
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			_, reqs := f.lostClaims()
			for i, req := range reqs[before+1:] {
				for _, jl := range req.Jobs {
					if jl.JobID == id && jl.Lease == lease {
						t.Fatalf("heartbeat %d after the one that named it lost lists the lease again: %+v", i+1, req.Jobs)
					}
				}
			}
			if reps := f.reportsOf(id); len(reps) != 0 {
				t.Fatalf("reports of an attempt whose lease was lost: %+v", reps)
			}
		})
	}
}
