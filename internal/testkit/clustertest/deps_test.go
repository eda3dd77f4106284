package clustertest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

func TestDependenciesAcrossBatch(t *testing.T) {
	c := newCluster(t, 3)
	startWorker(t, c, "w-deps", func(cfg *worker.Config) { cfg.Concurrency = 4 }, nil)
	url := c.URL(c.Followers(t)[0])

	t.Run("ADiamondRunsInDependencyOrder", func(t *testing.T) {
		// 0 → {1, 2} → 3, and 4 after 3.
		batch := wire.BatchSubmitRequest{Jobs: []wire.SubmitRequest{
			{Command: "echo root"},
			{Command: "echo left", DependsOn: []string{"$0"}},
			{Command: "echo right", DependsOn: []string{"$0"}},
			{Command: "echo join", DependsOn: []string{"$1", "$2"}},
			{Command: "echo tail", DependsOn: []string{"$3"}},
		}}
		jobs := decode[wire.JobList](t, call(t, http.StatusCreated, http.MethodPost, url+"/jobs/batch", batch)).Jobs
		if len(jobs) != 5 {
			t.Fatalf("batch created %d jobs, want 5", len(jobs))
		}
		for k, st := range []string{wire.StatusPending, wire.StatusBlocked, wire.StatusBlocked, wire.StatusBlocked, wire.StatusBlocked} {
			if jobs[k].Status != st {
				t.Errorf("job $%d submitted as %s, want %s", k, jobs[k].Status, st)
			}
		}
		if want := []string{jobs[1].ID, jobs[2].ID}; strings.Join(jobs[3].DependsOn, ",") != strings.Join(want, ",") {
			t.Errorf("$3 depends_on = %v, want the ids %v", jobs[3].DependsOn, want)
		}
		final := make([]wire.Job, len(jobs))
		for k, j := range jobs {
			final[k] = waitJob(t, url, j.ID, 15*time.Second, statusIs(wire.StatusDone, wire.StatusFailed, wire.StatusCancelled))
			if final[k].Status != wire.StatusDone {
				t.Fatalf("job $%d ended %s: %s", k, final[k].Status, final[k].LastError)
			}
		}
		edges := [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}}
		for _, e := range edges {
			parent, child := final[e[0]], final[e[1]]
			if child.StartedAt.Before(*parent.DoneAt) {
				t.Errorf("$%d started at %s, before its dependency $%d was done at %s",
					e[1], child.StartedAt.Format(time.RFC3339Nano), e[0], parent.DoneAt.Format(time.RFC3339Nano))
			}
		}
	})

	t.Run("AFailedDependencyFailsItsDependents", func(t *testing.T) {
		batch := wire.BatchSubmitRequest{Jobs: []wire.SubmitRequest{
			{Command: "exit 1", MaxAttempts: ptr(1)},
			{Command: "echo never", DependsOn: []string{"$0"}},
			{Command: "echo never either", DependsOn: []string{"$1"}},
			{Command: "echo independent"},
		}}
		jobs := decode[wire.JobList](t, call(t, http.StatusCreated, http.MethodPost, url+"/jobs/batch", batch)).Jobs
		parent := waitJob(t, url, jobs[0].ID, 15*time.Second, statusIs(wire.StatusFailed, wire.StatusDone))
		if parent.Status != wire.StatusFailed || parent.Attempts != 1 || parent.ExitCode == nil || *parent.ExitCode != 1 {
			t.Fatalf("parent = %s attempts %d exit %v, want failed once with exit 1", parent.Status, parent.Attempts, parent.ExitCode)
		}
		child := waitJob(t, url, jobs[1].ID, 5*time.Second, statusIs(wire.StatusFailed, wire.StatusCancelled, wire.StatusDone))
		if child.Status != wire.StatusFailed || !strings.Contains(child.LastError, jobs[0].ID) || child.Attempts != 0 {
			t.Errorf("dependent = %s attempts %d last_error %q, want failed, never run, naming %s", child.Status, child.Attempts, child.LastError, jobs[0].ID)
		}
		grandchild := getJob(t, url, jobs[2].ID)
		if grandchild.Status != wire.StatusFailed || !strings.Contains(grandchild.LastError, jobs[1].ID) {
			t.Errorf("second-level dependent = %s last_error %q, want failed naming %s", grandchild.Status, grandchild.LastError, jobs[1].ID)
		}
		if j := waitJob(t, url, jobs[3].ID, 15*time.Second, statusIs(wire.StatusDone, wire.StatusFailed)); j.Status != wire.StatusDone {
			t.Errorf("the independent job of the batch ended %s", j.Status)
		}
	})

	t.Run("ADependencyOnAnExistingJobWaitsForIt", func(t *testing.T) {
		first := submit(t, url, wire.SubmitRequest{Command: "echo first", Delay: "300ms"})
		second := submit(t, url, wire.SubmitRequest{Command: "echo second", DependsOn: []string{first.ID}})
		if second.Status != wire.StatusBlocked {
			t.Fatalf("dependent submitted as %s, want blocked", second.Status)
		}
		a := waitJob(t, url, first.ID, 10*time.Second, statusIs(wire.StatusDone))
		b := waitJob(t, url, second.ID, 10*time.Second, statusIs(wire.StatusDone))
		if b.StartedAt.Before(*a.DoneAt) {
			t.Errorf("dependent started %s before its dependency was done %s", b.StartedAt, a.DoneAt)
		}
	})
	c.Converged(t, 5*time.Second)
}
