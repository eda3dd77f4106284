package client_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// parkServer answers the parking, event and signal routes as
// park-contract.md says, keeping each request's path and body.
type parkServer struct {
	mu   sync.Mutex
	seen map[string]json.RawMessage // "METHOD path" -> body
}

func (p *parkServer) keep(r *http.Request) {
	var body json.RawMessage
	_ = json.NewDecoder(r.Body).Decode(&body)
	p.mu.Lock()
	p.seen[r.Method+" "+r.URL.EscapedPath()] = body
	p.mu.Unlock()
}

func (p *parkServer) body(t *testing.T, key string, into any) {
	t.Helper()
	p.mu.Lock()
	b, ok := p.seen[key]
	p.mu.Unlock()
	if !ok {
		t.Fatalf("no request %s", key)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: body %s: %v", key, b, err)
	}
}

func newParkServer(t *testing.T) (*parkServer, *client.Client) {
	t.Helper()
	p := &parkServer{seen: map[string]json.RawMessage{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs/{id}/steps/{key}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		p.keep(r)
		switch r.PathValue("key") {
		case "done":
			writeJSON(w, http.StatusConflict, wire.StepRecorded{Code: wire.CodeStepRecorded, Error: "recorded", Step: &wire.Step{Key: "done"}})
		case "stale":
			writeError(w, http.StatusConflict, wire.CodeStaleLease, "stale lease")
		case "passed":
			writeJSON(w, http.StatusCreated, wire.ParkReply{Step: wire.Step{Key: "passed", Kind: r.PathValue("verb"), Status: wire.StepOK}})
		default:
			wake := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			writeJSON(w, http.StatusCreated, wire.ParkReply{Parked: true, Step: wire.Step{Key: r.PathValue("key"),
				Kind: r.PathValue("verb"), Status: wire.StepWaiting, WakeAt: &wake, ChildID: "child-1"}})
		}
	})
	mux.HandleFunc("GET /jobs/{id}/steps/{key}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, wire.Step{Key: r.PathValue("key"), Kind: wire.StepWait, Status: wire.StepOK, Result: json.RawMessage(`{"paid":true}`)})
	})
	mux.HandleFunc("POST /events", func(w http.ResponseWriter, r *http.Request) {
		p.keep(r)
		writeJSON(w, http.StatusAccepted, wire.EventReply{Seq: 7, Woke: 2})
	})
	mux.HandleFunc("POST /jobs/{id}/signals/{name}", func(w http.ResponseWriter, r *http.Request) {
		p.keep(r)
		if r.PathValue("id") == "nope" {
			writeError(w, http.StatusNotFound, wire.CodeNotFound, "no such job")
			return
		}
		writeJSON(w, http.StatusAccepted, wire.EventReply{Seq: 8, Woke: 1})
	})
	return p, newClient(t, nil, newServer(t, mux).URL)
}

// TestParkingCalls: each parking call goes to its route with the
// contract's body, and reads a parked reply, a complete one, a 409
// step_recorded (read back with its result) and a stale lease; events and
// signals go to theirs.
func TestParkingCalls(t *testing.T) {
	p, cl := newParkServer(t)
	ctx := t.Context()

	t.Run("SleepParks", func(t *testing.T) {
		rep, err := cl.SleepStep(ctx, "j1", "nap", wire.SleepRequest{Lease: 3, DurationMillis: ms(1500)})
		if err != nil || !rep.Parked || rep.Step.Kind != wire.StepSleep || rep.Step.WakeAt == nil {
			t.Fatalf("SleepStep = %+v, %v", rep, err)
		}
		var got wire.SleepRequest
		p.body(t, "POST /jobs/j1/steps/nap/sleep", &got)
		if got.Lease != 3 || got.DurationMillis == nil || *got.DurationMillis != 1500 || got.Until != nil {
			t.Fatalf("sleep body %+v", got)
		}
	})
	t.Run("WaitParksWithEventAndKey", func(t *testing.T) {
		rep, err := cl.WaitStep(ctx, "j1", "settle#2", wire.WaitRequest{Lease: 3, Event: "payment.settled", Key: "order-42", TimeoutMillis: 60_000})
		if err != nil || !rep.Parked || rep.Step.Key != "settle#2" {
			t.Fatalf("WaitStep = %+v, %v", rep, err)
		}
		var got wire.WaitRequest
		p.body(t, "POST /jobs/j1/steps/settle%232/wait", &got)
		if got != (wire.WaitRequest{Lease: 3, Event: "payment.settled", Key: "order-42", TimeoutMillis: 60_000}) {
			t.Fatalf("wait body %+v", got)
		}
	})
	t.Run("InvokeNamesTheChild", func(t *testing.T) {
		rep, err := cl.InvokeStep(ctx, "j1", "child", wire.InvokeRequest{Lease: 3, Job: wire.SubmitRequest{Type: "receipt"}})
		if err != nil || !rep.Parked || rep.Step.ChildID != "child-1" {
			t.Fatalf("InvokeStep = %+v, %v", rep, err)
		}
		var got wire.InvokeRequest
		p.body(t, "POST /jobs/j1/steps/child/invoke", &got)
		if got.Lease != 3 || got.Job.Type != "receipt" {
			t.Fatalf("invoke body %+v", got)
		}
	})
	t.Run("CompleteStepDoesNotPark", func(t *testing.T) {
		rep, err := cl.SleepStep(ctx, "j1", "passed", wire.SleepRequest{Lease: 3, DurationMillis: ms(1)})
		if err != nil || rep.Parked || rep.Step.Status != wire.StepOK {
			t.Fatalf("SleepStep = %+v, %v", rep, err)
		}
	})
	t.Run("RecordedStepIsReadBackWithItsResult", func(t *testing.T) {
		rep, err := cl.WaitStep(ctx, "j1", "done", wire.WaitRequest{Lease: 3, Signal: "approve"})
		if err != nil || rep.Parked || rep.Step.Status != wire.StepOK || string(rep.Step.Result) != `{"paid":true}` {
			t.Fatalf("WaitStep of a recorded step = %+v, %v", rep, err)
		}
	})
	t.Run("StaleLease", func(t *testing.T) {
		if _, err := cl.SleepStep(ctx, "j1", "stale", wire.SleepRequest{Lease: 1, DurationMillis: ms(1)}); client.CodeOf(err) != wire.CodeStaleLease {
			t.Fatalf("SleepStep with a stale lease = %v", err)
		}
		if _, err := cl.SleepStep(ctx, "", "x", wire.SleepRequest{}); err == nil {
			t.Fatal("SleepStep of job \"\" sent")
		}
	})
	t.Run("SendEvent", func(t *testing.T) {
		rep, err := cl.SendEvent(ctx, wire.EventRequest{Name: "payment.settled", Key: "order-42", Payload: json.RawMessage(`{"amount":5}`)})
		if err != nil || rep.Seq != 7 || rep.Woke != 2 {
			t.Fatalf("SendEvent = %+v, %v", rep, err)
		}
		var got wire.EventRequest
		p.body(t, "POST /events", &got)
		if got.Name != "payment.settled" || got.Key != "order-42" || string(got.Payload) != `{"amount":5}` {
			t.Fatalf("event body %+v", got)
		}
	})
	t.Run("Signal", func(t *testing.T) {
		rep, err := cl.Signal(ctx, "j1", "approve", json.RawMessage(`"yes"`))
		if err != nil || rep.Woke != 1 {
			t.Fatalf("Signal = %+v, %v", rep, err)
		}
		var got wire.SignalRequest
		p.body(t, "POST /jobs/j1/signals/approve", &got)
		if string(got.Payload) != `"yes"` {
			t.Fatalf("signal body %+v", got)
		}
		if _, err := cl.Signal(ctx, "nope", "approve", nil); !client.IsNotFound(err) {
			t.Fatalf("Signal to an unknown job = %v, want not found", err)
		}
	})
}

func ms(n int64) *int64 { return &n }
