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
)

// TestDurableRoutes calls each route of issue #31's sleeps, waits,
// events, signals and invokes on a 3-node cluster: bad input gets a 4xx
// and changes nothing; good input parks the job, the outcome wakes it, and
// its next attempt replays to the recorded step. The replicas agree.
func TestDurableRoutes(t *testing.T) {
	c := newCluster(t, 3)
	url := c.URL(c.Leader(t))
	// claimIn claims one job of queue q, polling until one is due.
	claimIn := func(t *testing.T, q string) wire.Job {
		t.Helper()
		var j wire.Job
		clustertest.WaitFor(t, 10*time.Second, func() error {
			cr := decode[wire.ClaimResponse](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/claim",
				fmt.Sprintf(`{"worker_id":"w-%s","shell":true,"queues":[%q],"wait":"1s"}`, q, q)))
			if len(cr.Jobs) != 1 {
				return fmt.Errorf("no job of queue %s due yet", q)
			}
			j = cr.Jobs[0]
			return nil
		})
		return j
	}
	running := func(t *testing.T, q string) wire.Job {
		t.Helper()
		submit(t, url, wire.SubmitRequest{Command: "true", Queue: q})
		return claimIn(t, q)
	}
	// unchanged checks that bad input left the job as it was.
	unchanged := func(t *testing.T, before wire.Job, key string) {
		t.Helper()
		after := getJob(t, url, before.ID)
		if after.Status != wire.StatusRunning || after.Lease != before.Lease || after.Parked != nil {
			t.Fatalf("bad input changed the job: %+v", after)
		}
		call(t, http.StatusNotFound, http.MethodGet, url+"/jobs/"+before.ID+"/steps/"+key, nil)
	}
	post := func(t *testing.T, want int, path, body string) reply {
		t.Helper()
		return call(t, want, http.MethodPost, url+path, body)
	}

	t.Run("Sleep", func(t *testing.T) {
		j := running(t, "sleep")
		path := "/jobs/" + j.ID + "/steps/nap/sleep"
		post(t, http.StatusBadRequest, path, fmt.Sprintf(`{"lease":%d}`, j.Lease))
		post(t, http.StatusBadRequest, path, fmt.Sprintf(`{"lease":%d,"duration_ms":%d}`, j.Lease, int64(366*24*time.Hour/time.Millisecond)))
		post(t, http.StatusBadRequest, path, `{"duration_ms":10}`)
		unchanged(t, j, "nap")
		pr := decode[wire.ParkReply](t, post(t, http.StatusCreated, path, fmt.Sprintf(`{"lease":%d,"duration_ms":300}`, j.Lease)))
		if !pr.Parked || pr.Step.Kind != wire.StepSleep || pr.Step.WakeAt == nil {
			t.Fatalf("sleep reply %+v", pr)
		}
		// The resend of an unknown outcome gets the same reply.
		if again := decode[wire.ParkReply](t, post(t, http.StatusCreated, path, fmt.Sprintf(`{"lease":%d,"duration_ms":300}`, j.Lease))); !again.Parked {
			t.Fatalf("resend %+v", again)
		}
		if got := getJob(t, url, j.ID); got.Parked == nil || got.Parked.Kind != wire.StepSleep || got.Status != wire.StatusScheduled {
			t.Fatalf("sleeping job %s parked %+v", got.Status, got.Parked)
		}
		call(t, http.StatusConflict, http.MethodPost, url+"/jobs/"+j.ID+"/done", fmt.Sprintf(`{"lease":%d}`, j.Lease))
		j2 := claimIn(t, "sleep")
		if j2.Attempts != 1 || j2.Journal == nil || j2.Journal.Steps[0].Kind != wire.StepSleep {
			t.Fatalf("after the sleep: attempt %d journal %+v", j2.Attempts, j2.Journal)
		}
		post(t, http.StatusConflict, path, fmt.Sprintf(`{"lease":%d,"duration_ms":300}`, j2.Lease))
	})

	t.Run("WaitAndEvents", func(t *testing.T) {
		j := running(t, "wait")
		path := "/jobs/" + j.ID + "/steps/pay/wait"
		post(t, http.StatusBadRequest, path, fmt.Sprintf(`{"lease":%d,"key":"o1"}`, j.Lease))
		post(t, http.StatusBadRequest, path, fmt.Sprintf(`{"lease":%d,"event":"paid","signal":"s"}`, j.Lease))
		post(t, http.StatusBadRequest, path, fmt.Sprintf(`{"lease":%d,"event":"paid","timeout_ms":-1}`, j.Lease))
		unchanged(t, j, "pay")
		pr := decode[wire.ParkReply](t, post(t, http.StatusCreated, path, fmt.Sprintf(`{"lease":%d,"event":"paid","key":"o1","timeout_ms":600000}`, j.Lease)))
		if !pr.Parked || pr.Step.Status != wire.StepWaiting {
			t.Fatalf("wait reply %+v", pr)
		}
		if got := getJob(t, url, j.ID); got.Parked == nil || got.Parked.Event != "paid" || got.Parked.EventKey != "o1" {
			t.Fatalf("waiting job parked %+v", got.Parked)
		}
		post(t, http.StatusBadRequest, "/events", `{"name":"`+strings.Repeat("n", 201)+`","key":"o1"}`)
		post(t, http.StatusBadRequest, "/events", `{"name":"paid\u0001","key":"o1"}`)
		post(t, http.StatusRequestEntityTooLarge, "/events", `{"name":"paid","key":"o1","payload":"`+strings.Repeat("x", 70<<10)+`"}`)
		if got := getJob(t, url, j.ID); got.Parked == nil {
			t.Fatal("a refused event woke the job")
		}
		er := decode[wire.EventReply](t, post(t, http.StatusAccepted, "/events", `{"name":"paid","key":"o1","payload":{"amount":5}}`))
		if er.Woke != 1 || er.Seq == 0 {
			t.Fatalf("event reply %+v", er)
		}
		j2 := claimIn(t, "wait")
		rec := decode[wire.StepRecorded](t, post(t, http.StatusConflict, path, fmt.Sprintf(`{"lease":%d,"event":"paid","key":"o1"}`, j2.Lease)))
		if rec.Step == nil || rec.Step.Status != wire.StepOK || string(rec.Step.Result) != `{"amount":5}` {
			t.Fatalf("replay %+v", rec.Step)
		}
		// An event sent before its wait matches it at once.
		post(t, http.StatusAccepted, "/events", `{"name":"paid","key":"o2","payload":2}`)
		pr = decode[wire.ParkReply](t, post(t, http.StatusCreated, "/jobs/"+j.ID+"/steps/pay%232/wait", fmt.Sprintf(`{"lease":%d,"event":"paid","key":"o2"}`, j2.Lease)))
		if pr.Parked || string(pr.Step.Result) != "2" {
			t.Fatalf("wait after its event %+v", pr)
		}
	})

	t.Run("Signal", func(t *testing.T) {
		j := running(t, "signal")
		post(t, http.StatusCreated, "/jobs/"+j.ID+"/steps/ok/wait", fmt.Sprintf(`{"lease":%d,"signal":"approve"}`, j.Lease))
		post(t, http.StatusNotFound, "/jobs/nope/signals/approve", `{}`)
		post(t, http.StatusBadRequest, "/jobs/"+j.ID+"/signals/approve", `{"payload":1`)
		post(t, http.StatusRequestEntityTooLarge, "/jobs/"+j.ID+"/signals/approve", `{"payload":"`+strings.Repeat("x", 70<<10)+`"}`)
		if got := getJob(t, url, j.ID); got.Parked == nil || got.Parked.Signal != "approve" {
			t.Fatalf("a refused signal changed the job: parked %+v", got.Parked)
		}
		if er := decode[wire.EventReply](t, post(t, http.StatusAccepted, "/jobs/"+j.ID+"/signals/approve", `{"payload":true}`)); er.Woke != 1 {
			t.Fatalf("signal reply %+v", er)
		}
		claimIn(t, "signal")
	})

	t.Run("Invoke", func(t *testing.T) {
		j := running(t, "parent")
		path := "/jobs/" + j.ID + "/steps/kid/invoke"
		post(t, http.StatusBadRequest, path, fmt.Sprintf(`{"lease":%d,"job":{"queue":"kids"}}`, j.Lease))
		post(t, http.StatusBadRequest, path, fmt.Sprintf(`{"lease":%d,"job":{"command":"c","gang_size":2}}`, j.Lease))
		unchanged(t, j, "kid")
		body := fmt.Sprintf(`{"lease":%d,"job":{"command":"c","queue":"kids"}}`, j.Lease)
		pr := decode[wire.ParkReply](t, post(t, http.StatusCreated, path, body))
		if !pr.Parked || pr.Step.ChildID == "" {
			t.Fatalf("invoke reply %+v", pr)
		}
		if got := getJob(t, url, j.ID); got.Parked == nil || got.Parked.ChildID != pr.Step.ChildID {
			t.Fatalf("parent parked %+v", got.Parked)
		}
		kid := claimIn(t, "kids")
		if kid.ID != pr.Step.ChildID {
			t.Fatalf("claimed %s, want the child %s", kid.ID, pr.Step.ChildID)
		}
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+kid.ID+"/done", fmt.Sprintf(`{"lease":%d,"result":{"kid":1}}`, kid.Lease))
		j2 := claimIn(t, "parent")
		rec := decode[wire.StepRecorded](t, post(t, http.StatusConflict, path, fmt.Sprintf(`{"lease":%d,"job":{"command":"c"}}`, j2.Lease)))
		if rec.Step == nil || rec.Step.Status != wire.StepOK || string(rec.Step.Result) != `{"kid":1}` {
			t.Fatalf("replay %+v", rec.Step)
		}
	})

	c.Converged(t, 10*time.Second)
	want := c.Digest(t, c.Leader(t))
	for i := range c.Len() {
		if got := c.Digest(t, i); got != want {
			t.Errorf("node %d's digest %s, the leader's %s", i, got, want)
		}
	}
}
