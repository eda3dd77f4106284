package api

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// TestWorkerHeartbeatNamesLostLeases: a worker heartbeat listing a live
// lease, a reaped one and another attempt's old lease renews the live one
// alone and names the other two with their reasons; a reply with nothing
// lost, and a v0 heartbeat's, has no "lost" at all.
func TestWorkerHeartbeatNamesLostLeases(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, start, nil)
	for _, body := range []string{
		`{"command":"live"}`,
		`{"command":"reaped","max_attempts":1}`,
		`{"command":"moved","max_attempts":2}`,
	} {
		if code, werr := e.do(http.MethodPost, "/jobs", body, nil); code != http.StatusCreated {
			t.Fatalf("submit %s: %d %+v", body, code, werr)
		}
	}
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true,"max":3}`, &cr); code != http.StatusOK || len(cr.Jobs) != 3 {
		t.Fatalf("claim: %d %+v, %d jobs", code, werr, len(cr.Jobs))
	}
	byCommand := make(map[string]wire.Job, 3)
	for _, j := range cr.Jobs {
		byCommand[j.Command] = j
	}
	live, reaped, moved := byCommand["live"], byCommand["reaped"], byCommand["moved"]
	listed := wire.WorkerHeartbeatRequest{Jobs: []wire.JobLease{
		{JobID: live.ID, Lease: live.Lease}, {JobID: reaped.ID, Lease: reaped.Lease}, {JobID: moved.ID, Lease: moved.Lease},
	}}
	beat := func(body any) (wire.WorkerHeartbeatResponse, map[string]json.RawMessage) {
		t.Helper()
		var raw map[string]json.RawMessage
		if code, werr := e.do(http.MethodPost, "/workers/w1/heartbeat", body, &raw); code != http.StatusOK {
			t.Fatalf("heartbeat: %d %+v", code, werr)
		}
		var out wire.WorkerHeartbeatResponse
		data, _ := json.Marshal(raw)
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out, raw
	}
	if got, raw := beat(listed); got.Renewed != 3 || raw["lost"] != nil {
		t.Fatalf("all live: renewed %d, reply %v, want 3 and no lost", got.Renewed, raw)
	}

	// The reaper takes back reaped (failed for good) and moved (pending
	// again), which w2 then claims.
	e.clock.Add(time.Minute)
	for _, j := range []wire.Job{reaped, moved} {
		if _, err := e.node.Propose(context.Background(), fsm.Cmd{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: j.ID, Lease: j.Lease}}); err != nil {
			t.Fatalf("expire %s: %v", j.ID, err)
		}
	}
	e.clock.Add(time.Hour) // past the retry's backoff
	var cr2 wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w2","shell":true}`, &cr2); code != http.StatusOK || len(cr2.Jobs) != 1 || cr2.Jobs[0].ID != moved.ID {
		t.Fatalf("w2's claim: %d %+v %+v, want %s", code, werr, cr2.Jobs, moved.ID)
	}

	got, raw := beat(listed)
	want := []wire.LostLease{
		{JobID: reaped.ID, Lease: reaped.Lease, Reason: wire.CodeNotRunning},
		{JobID: moved.ID, Lease: moved.Lease, Reason: wire.CodeStaleLease},
	}
	if got.Renewed != 1 || !reflect.DeepEqual(got.Lost, want) {
		t.Fatalf("renewed %d lost %+v, want 1 and %+v", got.Renewed, got.Lost, want)
	}
	for _, k := range []string{"renewed", "lease_expires_at"} {
		if raw[k] == nil {
			t.Errorf("reply lacks %q: %v", k, raw)
		}
	}
	var j wire.Job
	if code, _ := e.do(http.MethodGet, "/jobs/"+moved.ID, nil, &j); code != http.StatusOK || j.WorkerID != "w2" || j.LeaseExpiresAt == nil || !j.LeaseExpiresAt.Equal(*cr2.Jobs[0].LeaseExpiresAt) {
		t.Fatalf("w2's attempt after w1's heartbeat: %d worker %s lease until %v, want w2's unchanged", code, j.WorkerID, j.LeaseExpiresAt)
	}

	// A v0 worker sends no body: every lease it holds is renewed, none named.
	if got, raw := beat(nil); got.Renewed != 1 || raw["lost"] != nil {
		t.Fatalf("v0 heartbeat: renewed %d, reply %v, want 1 and no lost", got.Renewed, raw)
	}
}
