package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestClusterProtocol checks how the cluster's protocol follows what its
// members report, and what the API answers a request that needs more. A
// fourth member is a fake that answers GET /health as an older release
// (no protocol), later as protocol 2, later not at all. (Its Raft address
// answers nothing; three of four voters still make a quorum.)
func TestClusterProtocol(t *testing.T) {
	if fsm.ProtocolVersion < 2 {
		t.Skip("this binary is of protocol 1")
	}
	c := clustertest.New(t, 3)
	hc := httpClient(t)
	leader := c.Leader(t)
	var reports atomic.Int64 // the protocol the fake reports; 0: none
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := map[string]any{"status": "ok", "node_id": "old", "role": "follower", "leader": "n1", "applied_index": 1, "term": 1}
		if p := reports.Load(); p > 0 {
			h["protocol"] = p
		}
		_ = json.NewEncoder(w).Encode(h)
	}))
	defer fake.Close()

	job := decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusCreated, "POST", c.URL(leader)+"/jobs", wire.SubmitRequest{Command: "x"}))
	doHTTP(t, hc, http.StatusOK, "POST", c.URL(leader)+"/jobs/"+job.ID+"/cancel", nil)
	waitProtocol := func(t *testing.T, want int) wire.Cluster {
		t.Helper()
		var cl wire.Cluster
		clustertest.WaitFor(t, 10*time.Second, func() error {
			cl = decodeJSON[wire.Cluster](t, doHTTP(t, hc, http.StatusOK, "GET", c.URL(c.Leader(t))+"/cluster", nil))
			if cl.Protocol != want || c.Node(c.Leader(t)).Raft().ClusterProtocol() != want {
				return fmt.Errorf("cluster protocol %d, want %d", cl.Protocol, want)
			}
			return nil
		})
		return cl
	}

	// leasedClaimThenDoneWithoutLease claims a fresh job with a lease and
	// reports it done without one: the answer tells whether the claim was
	// proposed with the fields of fsm.ProtocolFence (409 lease_required) or
	// without them, as an older release would (200).
	leasedClaimThenDoneWithoutLease := func(t *testing.T, want int) {
		t.Helper()
		queue := fmt.Sprintf("fence-%d", want)
		doHTTP(t, hc, http.StatusCreated, "POST", c.URL(c.Leader(t))+"/jobs", wire.SubmitRequest{Command: "x", Queue: queue})
		cr := decodeJSON[wire.ClaimResponse](t, doHTTP(t, hc, http.StatusOK, "POST", c.URL(c.Leader(t))+"/jobs/claim",
			wire.ClaimRequest{WorkerID: queue, Queues: []string{queue}, Shell: true, Max: 1}))
		if len(cr.Jobs) != 1 {
			t.Fatalf("claim from %s: %d jobs, want 1", queue, len(cr.Jobs))
		}
		doHTTP(t, hc, want, "POST", c.URL(c.Leader(t))+"/jobs/"+cr.Jobs[0].ID+"/done", nil)
	}

	// tracedSubmit submits a job with a traceparent header and returns the
	// trace the job keeps.
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tracedSubmit := func(t *testing.T) string {
		t.Helper()
		j := decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusCreated, "POST", c.URL(c.Leader(t))+"/jobs",
			wire.SubmitRequest{Command: "x", Queue: "traced"}, "traceparent", tp))
		return j.TraceParent
	}

	t.Run("EveryNodeOfTheSameBinary", func(t *testing.T) {
		cl := waitProtocol(t, fsm.ProtocolVersion)
		if got := tracedSubmit(t); fsm.ProtocolVersion >= fsm.ProtocolTrace && got != tp {
			t.Errorf("a traced submit at protocol %d keeps trace %q, want the caller's %q", fsm.ProtocolVersion, got, tp)
		}
		for _, n := range cl.Nodes {
			if n.Health == nil || n.Health.Protocol != fsm.ProtocolVersion {
				t.Errorf("node %s: health %+v, want protocol %d", n.ID, n.Health, fsm.ProtocolVersion)
			}
		}
	})
	t.Run("AMemberThatSaysNothingRunsProtocol1", func(t *testing.T) {
		doHTTP(t, hc, http.StatusOK, "POST", c.URL(leader)+"/cluster/join", wire.JoinRequest{ID: "old", Raft: "127.0.0.1:1", HTTP: fake.URL})
		cl := waitProtocol(t, 1)
		for _, n := range cl.Nodes {
			if n.ID == "old" && (n.Health == nil || n.Health.Protocol != 1) {
				t.Errorf("the old member's health: %+v, want protocol 1", n.Health)
			}
		}
		metrics := string(doHTTP(t, hc, http.StatusOK, "GET", c.URL(c.Leader(t))+"/metrics", nil).Body)
		for _, want := range []string{"\nworkron_cluster_protocol 1\n", fmt.Sprintf("\nworkron_protocol_version %d\n", fsm.ProtocolVersion)} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %q", strings.TrimSpace(want))
			}
		}
		r := doHTTP(t, hc, http.StatusServiceUnavailable, "POST", c.URL(c.Leader(t))+"/jobs/"+job.ID+"/retry", nil)
		e := decodeJSON[wire.Error](t, r)
		if e.Code != "upgrade_in_progress" || !strings.Contains(e.Error, "every node to run protocol 2") || r.Header.Get("Retry-After") == "" {
			t.Errorf("cascade retry at protocol 1: %+v, Retry-After %q", e, r.Header.Get("Retry-After"))
		}
		got := decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusOK, "GET", c.URL(c.Leader(t))+"/jobs/"+job.ID, nil))
		if got.Status != wire.StatusCancelled {
			t.Errorf("refused retry left the job %s", got.Status)
		}
		doHTTP(t, hc, http.StatusOK, "POST", c.URL(c.Leader(t))+"/jobs/"+job.ID+"/retry?cascade=false", nil) // protocol 1: proposed
		// A worker's commands go out without the fields of ProtocolFence
		// (an old node would stop at them), so the claim is not refused and
		// the v0 worker API's rules apply to it: a report without its lease is taken.
		leasedClaimThenDoneWithoutLease(t, http.StatusOK)
		doHTTP(t, hc, http.StatusOK, "POST", c.URL(c.Leader(t))+"/jobs/"+job.ID+"/cancel", nil)
	})
	t.Run("OnceItSaysProtocol2", func(t *testing.T) {
		reports.Store(2)
		waitProtocol(t, 2)
		// A traced submit is not refused while a member runs protocol 2
		// (clients that trace send a traceparent on every request): the
		// job is stored without its trace.
		if got := tracedSubmit(t); got != "" {
			t.Errorf("a traced submit at protocol 2 keeps trace %q, want none", got)
		}
		// So is a traced gang: its tasks have none.
		g := decodeJSON[wire.GangSubmitResponse](t, doHTTP(t, hc, http.StatusCreated, "POST", c.URL(c.Leader(t))+"/jobs",
			wire.SubmitRequest{Command: "x", Queue: "traced", GangSize: 2}, "traceparent", tp))
		if got := decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusOK, "GET", c.URL(c.Leader(t))+"/jobs/"+g.Tasks[1], nil)); got.TraceParent != "" {
			t.Errorf("a traced gang's task at protocol 2 keeps trace %q, want none", got.TraceParent)
		}
		// A job's heartbeat with progress is refused (nothing done), one
		// without it renews.
		doHTTP(t, hc, http.StatusCreated, "POST", c.URL(c.Leader(t))+"/jobs", wire.SubmitRequest{Command: "x", Queue: "hb-progress"})
		cr := decodeJSON[wire.ClaimResponse](t, doHTTP(t, hc, http.StatusOK, "POST", c.URL(c.Leader(t))+"/jobs/claim",
			wire.ClaimRequest{WorkerID: "hb-progress", Queues: []string{"hb-progress"}, Shell: true, Max: 1}))
		hbURL := c.URL(c.Leader(t)) + "/jobs/" + cr.Jobs[0].ID + "/heartbeat"
		e := decodeJSON[wire.Error](t, doHTTP(t, hc, http.StatusServiceUnavailable, "POST", hbURL,
			wire.HeartbeatRequest{Lease: cr.Jobs[0].Lease, Progress: &wire.ProgressUpdate{Percent: 5}}))
		if e.Code != "upgrade_in_progress" {
			t.Errorf("a job heartbeat with progress at protocol 2: %+v, want upgrade_in_progress", e)
		}
		doHTTP(t, hc, http.StatusOK, "POST", hbURL, wire.HeartbeatRequest{Lease: cr.Jobs[0].Lease})
		// An event and a sleep (ProtocolDurable) are refused, nothing done.
		if fsm.ProtocolVersion >= fsm.ProtocolDurable {
			e = decodeJSON[wire.Error](t, doHTTP(t, hc, http.StatusServiceUnavailable, "POST", c.URL(c.Leader(t))+"/events", wire.EventRequest{Name: "e", Key: "k"}))
			if e.Code != "upgrade_in_progress" {
				t.Errorf("an event at protocol 2: %+v, want upgrade_in_progress", e)
			}
			doHTTP(t, hc, http.StatusServiceUnavailable, "POST", c.URL(c.Leader(t))+"/jobs/"+cr.Jobs[0].ID+"/steps/nap/sleep",
				wire.SleepRequest{Lease: cr.Jobs[0].Lease, DurationMillis: new(int64(1000))})
			if got := decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusOK, "GET", c.URL(c.Leader(t))+"/jobs/"+cr.Jobs[0].ID, nil)); got.Status != wire.StatusRunning {
				t.Errorf("a refused sleep left the job %s", got.Status)
			}
		}
		doHTTP(t, hc, http.StatusOK, "POST", c.URL(c.Leader(t))+"/jobs/"+job.ID+"/retry", nil)
		leasedClaimThenDoneWithoutLease(t, http.StatusConflict) // lease_required: the fence is on
	})
	t.Run("AMemberThatStopsAnsweringKeepsWhatItLastSaid", func(t *testing.T) {
		fake.Close()
		time.Sleep(3 * api.ProtocolProbeInterval) // several probes that fail, not a synchronisation
		waitProtocol(t, 2)
		doHTTP(t, hc, http.StatusOK, "DELETE", c.URL(c.Leader(t))+"/cluster/nodes/old", nil)
	})
}
