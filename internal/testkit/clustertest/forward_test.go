package clustertest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

func TestForwarding(t *testing.T) {
	c := newCluster(t, 3)

	t.Run("SubmitOnFollowerIsForwarded", func(t *testing.T) {
		l := c.Leader(t)
		f := c.Followers(t)[0]
		r := call(t, http.StatusCreated, http.MethodPost, c.URL(f)+"/jobs", wire.SubmitRequest{Command: "echo forwarded"})
		if got, want := r.Header.Get("X-Workron-Leader"), c.Node(l).HTTPAddr(); got != want {
			t.Errorf("X-Workron-Leader = %q, want the leader's %q", got, want)
		}
		job := decode[wire.Job](t, r)
		if job.ID == "" || job.Command != "echo forwarded" || job.Status != wire.StatusPending {
			t.Fatalf("submitted job = %+v", job)
		}
		for i := range c.Len() {
			if got := getJob(t, c.URL(i), job.ID); got.ID != job.ID || got.Command != job.Command {
				t.Errorf("GET /jobs/%s on n%d = %+v", job.ID, i+1, got)
			}
		}
		for i := range c.Len() {
			clustertest.WaitFor(t, 5*time.Second, func() error {
				r := send(t, http.MethodGet, c.URL(i)+"/jobs/"+job.ID+"?stale=1", nil)
				if r.Status != http.StatusOK {
					return fmt.Errorf("stale GET on n%d: %s", i+1, r)
				}
				return nil
			})
		}
	})

	t.Run("ResubmitWithTheSameKeyOnAnotherNodeReturnsTheFirstJob", func(t *testing.T) {
		req := wire.SubmitRequest{Command: "echo once", IdempotencyKey: "forward-once"}
		first := decode[wire.Job](t, call(t, http.StatusCreated, http.MethodPost, c.URL(0)+"/jobs", req))
		for i := range c.Len() {
			again := decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, c.URL(i)+"/jobs", req))
			if again.ID != first.ID {
				t.Errorf("resubmit on n%d created %s, want the first job %s", i+1, again.ID, first.ID)
			}
		}
	})

	t.Run("ConsistentReadOnFollowerIsServedThere", func(t *testing.T) {
		f := c.Followers(t)[0]
		r := call(t, http.StatusOK, http.MethodGet, c.URL(f)+"/jobs", nil)
		if got := r.Header.Get("X-Workron-Leader"); got != "" {
			t.Errorf("X-Workron-Leader = %q: the read was forwarded to the leader", got)
		}
		if r.Header.Get(wire.HeaderAppliedIndex) == "" || r.Header.Get(wire.HeaderLeaderCommit) == "" {
			t.Errorf("a read's reply states no freshness: %v", r.Header)
		}
		if list := decode[wire.JobList](t, r); len(list.Jobs) == 0 {
			t.Errorf("GET /jobs on a follower listed no jobs: %s", r)
		}
	})

	t.Run("HealthAndClusterAgreeOnEveryNode", func(t *testing.T) {
		l := c.Leader(t)
		for i := range c.Len() {
			h := decode[wire.Health](t, call(t, http.StatusOK, http.MethodGet, c.URL(i)+"/health", nil))
			if h.Leader != c.Node(l).ID() || h.NodeID != c.Node(i).ID() {
				t.Errorf("n%d /health = %+v, want leader %s", i+1, h, c.Node(l).ID())
			}
			cl := decode[wire.Cluster](t, call(t, http.StatusOK, http.MethodGet, c.URL(i)+"/cluster", nil))
			if len(cl.Nodes) != c.Len() {
				t.Errorf("n%d /cluster lists %d nodes, want %d", i+1, len(cl.Nodes), c.Len())
			}
			for _, n := range cl.Nodes {
				if n.HTTP == "" || n.Raft == "" {
					t.Errorf("n%d /cluster: node %s lacks an address: %+v", i+1, n.ID, n)
				}
			}
		}
	})
}

func TestShellJobRunsEndToEnd(t *testing.T) {
	c := newCluster(t, 3)
	startWorker(t, c, "w-e2e", nil, nil)
	f := c.Followers(t)[0]
	job := submit(t, c.URL(f), wire.SubmitRequest{Command: "echo hello"})
	got := waitJob(t, c.URL(f), job.ID, 10*time.Second, statusIs(wire.StatusDone, wire.StatusFailed))
	if got.Status != wire.StatusDone {
		t.Fatalf("job ended %s: %+v", got.Status, got)
	}
	if got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("exit_code = %v, want 0", got.ExitCode)
	}
	if got.Output != "hello\n" {
		t.Errorf("output = %q, want %q", got.Output, "hello\n")
	}
	if got.WorkerID != "w-e2e" || got.Attempts != 1 {
		t.Errorf("worker_id %q attempts %d, want w-e2e and 1", got.WorkerID, got.Attempts)
	}
	c.Converged(t, 5*time.Second)
}
