//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package clustertest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestStepsSurviveALeaderChange: steps recorded through one leader are
// all there on the next, whose claim of the job's next attempt lists
// them, whose reads give their results, and which refuses a record under
// the first attempt's lease. The replicas agree on the journal.
func TestStepsSurviveALeaderChange(t *testing.T) {
	c := newCluster(t, 3)
	old := c.Leader(t)
	url := c.URL(old)
	j := submit(t, url, wire.SubmitRequest{Command: "true", MaxAttempts: ptr(3), Backoff: &wire.Backoff{Base: "1ms"}})
	cr := decode[wire.ClaimResponse](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/claim", `{"worker_id":"w1","shell":true,"wait":"5s"}`))
	if len(cr.Jobs) != 1 {
		t.Fatalf("claimed %d jobs", len(cr.Jobs))
	}
	lease := cr.Jobs[0].Lease
	for i, key := range []string{"charge", "send%232"} {
		call(t, http.StatusCreated, http.MethodPut, url+"/jobs/"+j.ID+"/steps/"+key, fmt.Sprintf(`{"lease":%d,"result":{"n":%d}}`, lease, i))
	}

	c.Kill(t, old)
	leader := c.Leader(t)
	url = c.URL(leader)
	call(t, http.StatusConflict, http.MethodPut, url+"/jobs/"+j.ID+"/steps/third", fmt.Sprintf(`{"lease":%d}`, lease+1))
	call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/fail", fmt.Sprintf(`{"lease":%d,"error":"crash"}`, lease))
	var next wire.Job
	clustertest.WaitFor(t, 10*time.Second, func() error {
		cr := decode[wire.ClaimResponse](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/claim", `{"worker_id":"w1","shell":true,"wait":"1s"}`))
		if len(cr.Jobs) != 1 {
			return fmt.Errorf("no job claimed yet")
		}
		next = cr.Jobs[0]
		return nil
	})
	jr := next.Journal
	if next.Attempts != 2 || jr == nil || jr.Count != 2 || len(jr.Steps) != 2 || jr.Steps[0].Key != "charge" || jr.Steps[1].Key != "send#2" {
		t.Fatalf("second attempt %d claimed with journal %+v", next.Attempts, jr)
	}
	st := decode[wire.Step](t, call(t, http.StatusOK, http.MethodGet, url+"/jobs/"+j.ID+"/steps/send%232", nil))
	if string(st.Result) != `{"n":1}` || st.JobAttempt != 1 {
		t.Fatalf("step after the leader change: %+v", st)
	}
	call(t, http.StatusConflict, http.MethodPut, url+"/jobs/"+j.ID+"/steps/third", fmt.Sprintf(`{"lease":%d}`, lease))
	call(t, http.StatusCreated, http.MethodPut, url+"/jobs/"+j.ID+"/steps/third", fmt.Sprintf(`{"lease":%d}`, next.Lease))

	c.Restart(t, old)
	c.Converged(t, 10*time.Second)
	want := c.Digest(t, leader)
	for i := range c.Len() {
		if got := c.Digest(t, i); got != want {
			t.Errorf("node %d's digest %s, the leader's %s", i, got, want)
		}
	}
}
