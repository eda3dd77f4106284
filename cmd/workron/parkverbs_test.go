package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/worker"
)

// The parking verbs check their arguments before they reach for the step
// socket: a bad count or a bad DURATION|TIME is exit 2 or an error naming
// it, and outside a job they say where they run.
func TestParkVerbArguments(t *testing.T) {
	t.Setenv(worker.StepSocketEnv, "")
	for _, tc := range []struct {
		args []string
		code int    // an exitError's code, 0: an error
		want string // the error's text, when not an exitError
	}{
		{[]string{"sleep", "nap"}, 2, ""},
		{[]string{"wait-event", "w", "e"}, 2, ""},
		{[]string{"wait-signal", "w"}, 2, ""},
		{[]string{"invoke", "c"}, 2, ""},
		{[]string{"sleep", "", "1s"}, 2, ""},
		{[]string{"wait-event", "w", "e", "k", "--timeout", "-1s"}, 0, "--timeout: -1s is negative"},
		{[]string{"sleep", "nap", "soon"}, 0, `sleep: "soon" is neither a positive duration (10m, 36h) nor an RFC 3339 time`},
		{[]string{"invoke", "c", "{"}, 0, "invoke: JOB-JSON: unexpected end of JSON input"},
		{[]string{"sleep", "nap", "1s"}, 0, errNoStepSocket.Error()},
		{[]string{"wait-event", "w", "e", "k", "--timeout", "1h"}, 0, errNoStepSocket.Error()},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), tc.args, &stdout, &stderr)
		var ee *exitError
		switch {
		case tc.code != 0 && (!errors.As(err, &ee) || ee.code != tc.code):
			t.Errorf("%q: %v, want exit %d", tc.args, err, tc.code)
		case tc.code == 0 && (err == nil || err.Error() != tc.want):
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := sleepRequest("soon"); err == nil {
		t.Error(`sleep "soon" accepted`)
	}
	if r, err := sleepRequest("1500us"); err != nil || r.DurationMillis == nil || *r.DurationMillis != 2 {
		t.Errorf("sleep 1500us: %+v, %v; want 2 ms (rounded up)", r, err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	if r, err := sleepRequest(at.Format(time.RFC3339)); err != nil || r.Until == nil || !r.Until.Equal(at) || r.DurationMillis != nil {
		t.Errorf("sleep until %s: %+v, %v", at, r, err)
	}
}

// A complete parking step's outcome: a wait's payload printed, a timeout
// exit 3, a failed child an error, a sleep nothing.
func TestParkOutcome(t *testing.T) {
	var out bytes.Buffer
	if err := parkOutcome(&wire.Step{Kind: wire.StepWait, Status: wire.StepOK, Result: json.RawMessage(`{"a":1}`)}, &out); err != nil || out.String() != "{\"a\":1}\n" {
		t.Fatalf("wait ok: %q, %v", out.String(), err)
	}
	var ee *exitError
	if err := parkOutcome(&wire.Step{Kind: wire.StepWait, Status: wire.StepTimeout}, &out); !errors.As(err, &ee) || ee.code != exitWaitTimeout {
		t.Fatalf("wait timeout: %v, want exit 3", err)
	}
	if err := parkOutcome(&wire.Step{Kind: wire.StepInvoke, Status: wire.StepFailed, Key: "c", ChildID: "j2", Result: json.RawMessage(`{"status":"failed"}`)}, &out); err == nil {
		t.Fatal("a failed child: no error")
	}
	out.Reset()
	if err := parkOutcome(&wire.Step{Kind: wire.StepSleep, Status: wire.StepOK}, &out); err != nil || out.Len() != 0 {
		t.Fatalf("sleep: %q, %v", out.String(), err)
	}
}

// events send and jobs signal take a PAYLOAD that is JSON, checked before
// any request.
func TestEventPayloadMustBeJSON(t *testing.T) {
	for _, args := range [][]string{
		{"events", "send", "--server", "http://127.0.0.1:1", "paid", "o1", "not json"},
		{"jobs", "signal", "--server", "http://127.0.0.1:1", "j1", "approve", "{"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), args, &stdout, &stderr); !errors.Is(err, errBadPayload) {
			t.Errorf("%q: %v, want errBadPayload", args, err)
		}
	}
}

// TestStepNamesBoundIsTheClusters: the worker's bound on step names in
// an attempt is the FSM's on steps in a journal.
func TestStepNamesBoundIsTheClusters(t *testing.T) {
	if worker.MaxStepNames != fsm.MaxStepsPerJob {
		t.Fatalf("worker.MaxStepNames %d, fsm.MaxStepsPerJob %d", worker.MaxStepNames, fsm.MaxStepsPerJob)
	}
}
