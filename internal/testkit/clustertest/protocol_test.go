package clustertest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// traceParent is the caller's trace a traced submit sends.
const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// tracedSubmit submits a job to queue with a traceparent header and
// returns the reply.
func tracedSubmit(t *testing.T, url, queue string) reply {
	t.Helper()
	b, _ := json.Marshal(wire.SubmitRequest{Command: "x", Queue: queue})
	req, err := http.NewRequest(http.MethodPost, url+"/jobs", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceParent)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// TestFreshClusterRunsItsProtocolAtOnce: a new cluster of one binary runs
// that binary's protocol from its first request, not protocol 1 until its
// members have been asked: the first claim is bound to its claimer (a done
// without its lease is refused), PUT /queues is taken, and a submit keeps
// its traceparent.
func TestFreshClusterRunsItsProtocolAtOnce(t *testing.T) {
	if fsm.ProtocolVersion < fsm.ProtocolTrace {
		t.Skip("a binary before traces")
	}
	c := newCluster(t, 3)
	u := c.URL(c.Leader(t))

	r := tracedSubmit(t, u, "first")
	if r.Status != http.StatusCreated {
		t.Fatalf("the first submit: %s", r)
	}
	if j := decode[wire.Job](t, r); j.TraceParent != traceParent {
		t.Errorf("the first traced submit keeps trace %q, want %q", j.TraceParent, traceParent)
	}
	cr := decode[wire.ClaimResponse](t, call(t, http.StatusOK, http.MethodPost, u+"/jobs/claim",
		wire.ClaimRequest{WorkerID: "w1", Queues: []string{"first"}, Shell: true, Max: 1}))
	if len(cr.Jobs) != 1 {
		t.Fatalf("the first claim: %d jobs", len(cr.Jobs))
	}
	if r := send(t, http.MethodPost, u+"/jobs/"+cr.Jobs[0].ID+"/done", nil); r.Status != http.StatusConflict {
		t.Errorf("a done without the lease of the first claim: %s, want 409 lease_required", r)
	}
	call(t, http.StatusOK, http.MethodPut, u+"/queues/first", map[string]any{"concurrency": 2, "key_weights": map[string]int{"a": 2}})
}

// TestJoinKeepsPlainSubmits: while a member that just joined has not said
// which protocol it runs, submits are served as before it joined: none
// answers 503 upgrade_in_progress (nor does one whose entry carries a
// waiting worker's claim), and a traced one keeps its trace. The member is
// a fake that answers GET /health at this binary's protocol (its Raft
// address answers nothing; three of four voters still make a quorum).
func TestJoinKeepsPlainSubmits(t *testing.T) {
	if fsm.ProtocolVersion < fsm.ProtocolTrace {
		t.Skip("a binary before traces")
	}
	c := newCluster(t, 3)
	u := c.URL(c.Leader(t))
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "node_id": "n4", "role": "follower", "leader": "n1",
			"applied_index": 1, "term": 1, "protocol": fsm.ProtocolVersion})
	}))
	defer fake.Close()

	// A worker waits for the queue: a submit may carry its claim.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		r, err := try(http.MethodPost, u+"/jobs/claim", wire.ClaimRequest{WorkerID: "waiter", Queues: []string{"joined"}, Shell: true,
			Max: 1, Wait: "5s", ClaimSeq: 1})
		if err != nil || r.Status != http.StatusOK {
			t.Errorf("the waiting claim: %v %s", err, r)
		}
	})
	call(t, http.StatusOK, http.MethodPost, u+"/cluster/join", wire.JoinRequest{ID: "n4", Raft: "127.0.0.1:1", HTTP: fake.URL})
	for i := range 5 {
		if r := tracedSubmit(t, u, "joined"); r.Status != http.StatusCreated {
			t.Errorf("submit %d right after a join: %s", i, r)
		} else if j := decode[wire.Job](t, r); j.TraceParent != traceParent {
			t.Errorf("submit %d right after a join keeps trace %q, want %q", i, j.TraceParent, traceParent)
		}
	}
	call(t, http.StatusOK, http.MethodDelete, u+"/cluster/nodes/n4", nil)
}
