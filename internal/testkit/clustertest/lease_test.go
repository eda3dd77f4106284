package clustertest_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// claimOne claims through node url for worker and requires one job back.
func claimOne(tb testing.TB, url, worker, wait string, queues ...string) wire.Job {
	tb.Helper()
	r := call(tb, http.StatusOK, http.MethodPost, url+"/jobs/claim", wire.ClaimRequest{WorkerID: worker, Queues: queues, Wait: wait})
	resp := decode[wire.ClaimResponse](tb, r)
	if len(resp.Jobs) != 1 {
		tb.Fatalf("claim for %s: want 1 job, got %s", worker, r)
	}
	return resp.Jobs[0]
}

// wantError checks an error reply: its status, its code and that its
// sentence names what it must.
func wantError(tb testing.TB, r reply, status int, code string, mentions ...string) {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("want HTTP %d %s, got %s", status, code, r)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("error reply has Content-Type %q, want JSON", ct)
	}
	e := decode[wire.Error](tb, r)
	if e.Code != code || e.Error == "" {
		tb.Errorf("error body = %+v, want code %q and a sentence", e, code)
	}
	for _, m := range mentions {
		if !strings.Contains(e.Error, m) {
			tb.Errorf("error %q does not mention %q", e.Error, m)
		}
	}
}

func TestFencingRejectsStaleLease(t *testing.T) {
	const ttl = 300 * time.Millisecond
	c := newCluster(t, 3, clustertest.WithLeaseTTL(ttl))
	f := c.Followers(t)
	urlA, urlB := c.URL(f[0]), c.URL(f[1])

	job := submit(t, urlA, wire.SubmitRequest{
		Command: "true",
		Backoff: &wire.Backoff{Base: "10ms", Max: "10ms"},
	})
	a := claimOne(t, urlA, "worker-a", "")
	if a.ID != job.ID || a.Lease == 0 || a.WorkerID != "worker-a" {
		t.Fatalf("A's claim = %+v", a)
	}

	// A goes silent before it ever heartbeats; the reaper expires its
	// lease and the job goes back to pending, A's unacknowledged attempt
	// not counted.
	waitJob(t, urlB, job.ID, 5*time.Second, func(j wire.Job) bool {
		return j.Status == wire.StatusPending || j.Status == wire.StatusScheduled
	})
	b := claimOne(t, urlB, "worker-b", "5s")
	if b.ID != job.ID || b.Lease <= a.Lease || b.Attempts != 1 {
		t.Fatalf("B's claim = lease %d attempts %d, want a lease above A's %d and attempt 1 again", b.Lease, b.Attempts, a.Lease)
	}
	// B keeps its lease while the subtests look, however slow the machine:
	// a heartbeat every third of the lease.
	stop := make(chan struct{})
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for {
			select {
			case <-stop:
				return
			case <-time.After(ttl / 3):
				_, _ = try(http.MethodPost, urlB+"/jobs/"+job.ID+"/heartbeat", wire.HeartbeatRequest{Lease: b.Lease})
			}
		}
	}()
	stopBeats := sync.OnceFunc(func() { close(stop); <-beats })
	t.Cleanup(stopBeats)

	t.Run("StaleDoneIs409AndChangesNothing", func(t *testing.T) {
		zero := 0
		r := send(t, http.MethodPost, urlA+"/jobs/"+job.ID+"/done", wire.ReportRequest{Lease: a.Lease, ExitCode: &zero, Output: "from A"})
		wantError(t, r, http.StatusConflict, "stale_lease")
		got := getJob(t, urlA, job.ID)
		if got.Status != wire.StatusRunning || got.WorkerID != "worker-b" || got.Lease != b.Lease || got.Output != "" {
			t.Errorf("after A's stale done the job is %s worker %q lease %d output %q", got.Status, got.WorkerID, got.Lease, got.Output)
		}
	})

	t.Run("StaleHeartbeatAndFailAre409", func(t *testing.T) {
		r := send(t, http.MethodPost, urlA+"/jobs/"+job.ID+"/heartbeat", wire.HeartbeatRequest{Lease: a.Lease})
		wantError(t, r, http.StatusConflict, "stale_lease")
		r = send(t, http.MethodPost, urlA+"/jobs/"+job.ID+"/fail", wire.ReportRequest{Lease: a.Lease, Error: "from A"})
		wantError(t, r, http.StatusConflict, "stale_lease")
	})

	t.Run("CurrentLeaseDoneIsRecorded", func(t *testing.T) {
		stopBeats()
		zero := 0
		call(t, http.StatusOK, http.MethodPost, urlB+"/jobs/"+job.ID+"/done", wire.ReportRequest{Lease: b.Lease, ExitCode: &zero, Output: "from B"})
		got := getJob(t, urlA, job.ID)
		if got.Status != wire.StatusDone || got.WorkerID != "worker-b" || got.Output != "from B" {
			t.Fatalf("final job: status %s worker %q output %q", got.Status, got.WorkerID, got.Output)
		}
		if len(got.AttemptHistory) != 2 {
			t.Fatalf("attempt_history = %+v, want 2 attempts", got.AttemptHistory)
		}
		first, second := got.AttemptHistory[0], got.AttemptHistory[1]
		if first.WorkerID != "worker-a" || first.Lease != a.Lease || first.Status != "returned" || !first.Expired ||
			!strings.Contains(first.Error, "unacknowledged") || !strings.Contains(first.Error, "lease expired") {
			t.Errorf("first attempt = %+v, want A's expired lease, unacknowledged", first)
		}
		if second.WorkerID != "worker-b" || second.Lease != b.Lease || second.Status != wire.StatusDone {
			t.Errorf("second attempt = %+v, want B's done", second)
		}
		// Once done, A's old lease stays refused.
		r := send(t, http.MethodPost, urlA+"/jobs/"+job.ID+"/done", wire.ReportRequest{Lease: a.Lease})
		wantError(t, r, http.StatusConflict, "stale_lease")
	})
	c.Converged(t, 5*time.Second)
}

// TestUnacknowledgedAttemptIsNotCharged: a worker that claims a job of
// max_attempts 1 and freezes before it ever heartbeats (SIGSTOP, its TCP
// connection open) does not use up the job's one attempt: once its lease
// expires, another worker runs the job to done.
func TestUnacknowledgedAttemptIsNotCharged(t *testing.T) {
	c := newCluster(t, 3, clustertest.WithLeaseTTL(300*time.Millisecond), clustertest.WithReapInterval(50*time.Millisecond))
	url := c.URL(c.Leader(t))
	one := 1
	job := submit(t, url, wire.SubmitRequest{Command: "true", Queue: "unacked", MaxAttempts: &one})
	frozen := claimOne(t, url, "frozen", "", "unacked")
	if frozen.ID != job.ID || frozen.Attempts != 1 {
		t.Fatalf("frozen's claim = %+v", frozen)
	}
	got := waitJob(t, url, job.ID, 10*time.Second, func(j wire.Job) bool { return j.Status != wire.StatusRunning })
	if got.Status != wire.StatusPending || got.Attempts != 0 {
		t.Fatalf("after the frozen worker's lease expired: %s with %d attempts, want pending with none counted", got.Status, got.Attempts)
	}
	alive := claimOne(t, url, "alive", "5s", "unacked")
	if alive.ID != job.ID || alive.Attempts != 1 || alive.Lease <= frozen.Lease {
		t.Fatalf("alive's claim = attempt %d lease %d, want attempt 1 above lease %d", alive.Attempts, alive.Lease, frozen.Lease)
	}
	call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+job.ID+"/done", wire.ReportRequest{Lease: alive.Lease})
	got = getJob(t, url, job.ID)
	h := got.AttemptHistory
	if got.Status != wire.StatusDone || got.Attempts != 1 || len(h) != 2 ||
		h[0].Status != "returned" || !h[0].Expired || h[0].WorkerID != "frozen" || h[1].Status != wire.StatusDone {
		t.Fatalf("job %s: %s after %d attempts, history %+v; want done in its one attempt after frozen's returned one",
			got.ID, got.Status, got.Attempts, h)
	}
	c.Converged(t, 5*time.Second)
}
