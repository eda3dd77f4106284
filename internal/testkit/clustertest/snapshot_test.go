package clustertest_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// runSome submits n jobs to queue through url, claims half of them as
// worker and reports those done, all over raw HTTP.
func runSome(t *testing.T, url, queue string, n int) {
	t.Helper()
	batch := wire.BatchSubmitRequest{}
	for k := range n {
		batch.Jobs = append(batch.Jobs, wire.SubmitRequest{Command: fmt.Sprintf("echo %d", k), Queue: queue, Metadata: map[string]string{"k": fmt.Sprint(k)}})
	}
	call(t, http.StatusCreated, http.MethodPost, url+"/jobs/batch", batch)
	r := call(t, http.StatusOK, http.MethodPost, url+"/jobs/claim", wire.ClaimRequest{WorkerID: "snap-worker", Queues: []string{queue}, Max: n / 2})
	claimed := decode[wire.ClaimResponse](t, r).Jobs
	if len(claimed) != n/2 {
		t.Fatalf("claimed %d jobs, want %d", len(claimed), n/2)
	}
	zero := 0
	for _, j := range claimed {
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/done", wire.ReportRequest{Lease: j.Lease, ExitCode: &zero, Output: j.Command})
	}
}

func TestSnapshotAndRestoreOnRealNodes(t *testing.T) {
	c := newCluster(t, 3)
	l := c.Leader(t)
	runSome(t, c.URL(l), "snap-a", 40)
	c.Converged(t, 5*time.Second)
	for i := range c.Len() {
		c.Snapshot(t, i)
		snaps, _ := filepath.Glob(filepath.Join(c.Node(i).DataDir(), "snapshots", "*", "meta.json"))
		if len(snaps) == 0 {
			t.Fatalf("n%d took a snapshot but its data dir holds none", i+1)
		}
	}

	t.Run("AFollowerRestartedOnItsFilesCatchesUp", func(t *testing.T) {
		f := c.Followers(t)[0]
		c.Kill(t, f)
		l := c.Leader(t)
		runSome(t, c.URL(l), "snap-b", 20)
		c.Snapshot(t, l)
		c.Restart(t, f)
		idx := c.Converged(t, 10*time.Second)
		t.Logf("n%d caught up to %d", f+1, idx)
		wantJobs(t, c, f, 60)
	})

	t.Run("AFollowerThatLostItsStateFileRestoresFromItsSnapshot", func(t *testing.T) {
		f := c.Followers(t)[0]
		c.Snapshot(t, f) // a snapshot that holds snap-b
		c.Kill(t, f)
		if err := os.Remove(filepath.Join(c.Node(f).DataDir(), "state.db")); err != nil {
			t.Fatal(err)
		}
		l := c.Leader(t)
		runSome(t, c.URL(l), "snap-c", 20)
		c.Restart(t, f)
		idx := c.Converged(t, 10*time.Second)
		t.Logf("n%d restored and caught up to %d", f+1, idx)
		wantJobs(t, c, f, 80)
	})

	t.Run("SnapshotsTakenWhileWritingAgreeAfterRestart", func(t *testing.T) {
		l := c.Leader(t)
		snapped := make(chan error, 1)
		go func() {
			var errs []error
			for i := range c.Len() {
				// "Nothing new to snapshot" is possible if writes lag.
				for try := 0; ; try++ {
					err := c.Node(i).Raft().Snapshot()
					if err == nil || try == 100 {
						errs = append(errs, err)
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			snapped <- errors.Join(errs...)
		}()
		runSome(t, c.URL(l), "snap-d", 40)
		if err := <-snapped; err != nil {
			t.Fatalf("snapshot while writing: %v", err)
		}
		f := c.Followers(t)[1]
		c.Kill(t, f)
		c.Restart(t, f)
		c.Converged(t, 10*time.Second)
		wantJobs(t, c, f, 120)
	})
}

// wantJobs checks node i's own state (a stale read) lists n jobs.
func wantJobs(t *testing.T, c *clustertest.Cluster, i, n int) {
	t.Helper()
	list := decode[wire.JobList](t, call(t, http.StatusOK, http.MethodGet, c.URL(i)+"/jobs?stale=1&limit=1000", nil))
	if len(list.Jobs) != n {
		t.Errorf("n%d holds %d jobs, want %d", i+1, len(list.Jobs), n)
	}
}
