//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package clustertest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// TestCascadeInChunks cancels the root of a chain of 4,000 jobs in a
// cluster whose cascaders wait an hour between passes: the cancel answers
// with the root cancelled, GET shows it cancelled, a submit is accepted
// and a job not yet reached is still blocked, saying the cascade is under
// way. A new leader's cascader then resumes the cascade at once and ends
// every job, alike on every node.
func TestCascadeInChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a chain of 4,000 jobs")
	}
	const batches, per = 4, 1000
	c := newCluster(t, 3, clustertest.WithConfig(func(_ int, nc *node.Config) { nc.Leader.Cascader.Interval = time.Hour }))
	lead := c.Leader(t)
	url := c.URL(lead)
	var ids []string
	for b := range batches {
		var batch wire.BatchSubmitRequest
		for i := range per {
			dep := []string{fmt.Sprintf("$%d", i-1)}
			switch {
			case b == 0 && i == 0:
				dep = nil
			case i == 0:
				dep = []string{ids[len(ids)-1]}
			}
			batch.Jobs = append(batch.Jobs, wire.SubmitRequest{Command: "true", Queue: "chain", DependsOn: dep})
		}
		for _, j := range decode[wire.JobList](t, call(t, http.StatusCreated, http.MethodPost, url+"/jobs/batch", batch)).Jobs {
			ids = append(ids, j.ID)
		}
	}
	root, last := ids[0], ids[len(ids)-1]

	got := decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+root+"/cancel", nil))
	if got.Status != wire.StatusCancelled {
		t.Fatalf("cancel answered %s, want cancelled", got.Status)
	}
	if j := getJob(t, url, root); j.Status != wire.StatusCancelled {
		t.Fatalf("GET of the root right after the cancel: %s", j.Status)
	}
	if other := submit(t, url, wire.SubmitRequest{Command: "true", Queue: "other"}); other.Status != wire.StatusPending {
		t.Fatalf("submit during the cascade: %s", other.Status)
	}
	j := getJob(t, url, last)
	if j.Status != wire.StatusBlocked || !strings.Contains(j.Waiting, "cascade of job "+root+" (cancelled) is under way") {
		t.Fatalf("the last job during the cascade: %s, waiting %q; want blocked, saying the cascade is under way", j.Status, j.Waiting)
	}

	c.Kill(t, lead)
	url = c.URL(c.Leader(t))
	waitJob(t, url, last, 60*time.Second, statusIs(wire.StatusCancelled))
	for _, id := range []string{ids[1], ids[per], ids[len(ids)/2], last} {
		if j := getJob(t, url, id); j.Status != wire.StatusCancelled || !strings.HasPrefix(j.LastError, "dependency ") {
			t.Errorf("job %s: %s %q, want cancelled by the cascade", id, j.Status, j.LastError)
		}
	}
	c.Converged(t, 30*time.Second)
}
