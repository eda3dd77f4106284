package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

// Durable sleeps, waits and child jobs of a shell job (issue #31): verbs
// run inside a job run by `workron worker`, over its step socket, as
// `workron step` is.

// exitWaitTimeout is the exit code of wait-event and wait-signal when the
// wait's timeout passed before its event.
const exitWaitTimeout = 3

// exitParked is the exit code of a parking verb whose job parked, should
// the worker not have ended the process first (it ends it at once).
const exitParked = 75

// parkedLinger bounds how long a parking verb whose job parked waits for
// the worker to end its process.
const parkedLinger = time.Minute

const parkUsage = `usage (inside a shell job run by workron worker):
  workron sleep NAME DURATION|TIME      park the job for DURATION (10m, 36h) or until TIME (RFC 3339)
  workron wait-event NAME EVENT KEY [--timeout D]
                                        park until event EVENT with key KEY is sent; print its payload
  workron wait-signal NAME SIGNAL [--timeout D]
                                        park until signal SIGNAL is sent to the job; print its payload
  workron invoke NAME JOB-JSON          submit JOB-JSON (a POST /jobs body) as a child job once, park
                                        until it ends; print its result

Each is durable step NAME of the job (NAME#n for its n-th use in a run). When
the job parks, the worker ends the script and its attempt, uncharged; when the
job wakes, the script runs again from the top, its recorded steps replay, and
the verb goes on: sleep exits 0; wait-event and wait-signal print the payload
and exit 0, or exit 3 when --timeout passed first (default: no timeout);
invoke prints the child's result and exits 0, or fails (exit 1) when the child
failed or was cancelled.
`

// runPark is `workron sleep|wait-event|wait-signal|invoke ...`.
func runPark(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, parkUsage) }
	var timeout time.Duration
	if verb == "wait-event" || verb == "wait-signal" {
		fs.DurationVar(&timeout, "timeout", 0, "give up waiting after this long (exit 3); 0: no timeout")
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	want := map[string]int{"sleep": 2, "wait-event": 3, "wait-signal": 2, "invoke": 2}[verb]
	if len(pos) != want || pos[0] == "" {
		fmt.Fprint(stderr, parkUsage)
		return &exitError{code: 2}
	}
	if timeout < 0 {
		return fmt.Errorf("--timeout: %s is negative", timeout)
	}
	park, err := parkCall(verb, pos, timeout)
	if err != nil {
		return err
	}
	path := os.Getenv(worker.StepSocketEnv)
	if path == "" {
		return errNoStepSocket
	}
	sc := worker.NewStepSocketClient(path)
	defer sc.Close()
	look, err := park(ctx, sc)
	if err != nil {
		return err
	}
	if look.Parked {
		return awaitEnd(ctx, look.Key, stderr)
	}
	return parkOutcome(look.Step, stdout)
}

// parkCall checks a parking verb's arguments (pos: NAME and the rest)
// and returns the call it makes on the step socket.
func parkCall(verb string, pos []string, timeout time.Duration) (func(context.Context, *worker.StepSocketClient) (*worker.StepLookup, error), error) {
	name := pos[0]
	switch verb {
	case "sleep":
		req, err := sleepRequest(pos[1])
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, sc *worker.StepSocketClient) (*worker.StepLookup, error) {
			return sc.Sleep(ctx, name, req)
		}, nil
	case "wait-event", "wait-signal":
		ms := (timeout + time.Millisecond - 1).Milliseconds() // rounded up: 0 is no timeout
		req := wire.WaitRequest{Signal: pos[1], TimeoutMillis: ms}
		if verb == "wait-event" {
			req = wire.WaitRequest{Event: pos[1], Key: pos[2], TimeoutMillis: ms}
		}
		return func(ctx context.Context, sc *worker.StepSocketClient) (*worker.StepLookup, error) {
			return sc.Wait(ctx, name, req)
		}, nil
	}
	var job wire.SubmitRequest
	if err := json.Unmarshal([]byte(pos[1]), &job); err != nil {
		return nil, fmt.Errorf("invoke: JOB-JSON: %w", err)
	}
	return func(ctx context.Context, sc *worker.StepSocketClient) (*worker.StepLookup, error) {
		return sc.Invoke(ctx, name, job)
	}, nil
}

// sleepRequest is the request of `workron sleep NAME ARG`: ARG is a
// duration, or an RFC 3339 time.
func sleepRequest(arg string) (wire.SleepRequest, error) {
	if t, err := time.Parse(time.RFC3339, arg); err == nil {
		u := t.UTC()
		return wire.SleepRequest{Until: &u}, nil
	}
	d, err := time.ParseDuration(arg)
	if err != nil || d <= 0 {
		return wire.SleepRequest{}, fmt.Errorf("sleep: %q is neither a positive duration (10m, 36h) nor an RFC 3339 time", arg)
	}
	ms := (d + time.Millisecond - 1).Milliseconds()
	return wire.SleepRequest{DurationMillis: &ms}, nil
}

// awaitEnd is what a verb whose job parked does: the worker ends the
// job's processes, this one with them; it waits for that (so a script
// goes no further), bounded by parkedLinger.
func awaitEnd(ctx context.Context, key string, stderr io.Writer) error {
	fmt.Fprintf(stderr, "workron: the job parked on step %s; its worker ends this attempt\n", key)
	t := time.NewTimer(parkedLinger)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return &exitError{code: exitParked}
}

// parkOutcome prints a complete parking step's outcome: a wait's payload
// or an invoke's result (JSON as it came, then a newline), nothing for a
// sleep; a timeout exits 3, a failed child is an error.
func parkOutcome(st *wire.Step, stdout io.Writer) error {
	switch st.Status {
	case wire.StepTimeout:
		return &exitError{code: exitWaitTimeout}
	case wire.StepFailed:
		return fmt.Errorf("step %s: child job %s ended: %s", st.Key, st.ChildID, st.Result)
	case wire.StepOK:
	default:
		return fmt.Errorf("step %s: recorded %s", st.Key, st.Status)
	}
	if st.Kind == wire.StepSleep || len(st.Result) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(stdout, "%s\n", st.Result)
	return err
}

// errBadPayload is the error of a PAYLOAD argument that is not JSON.
var errBadPayload = errors.New("PAYLOAD is not JSON (quote a string: '\"text\"')")

// payloadArg is the optional PAYLOAD argument at pos[i] as JSON (nil when
// absent).
func payloadArg(pos []string, i int) (json.RawMessage, error) {
	if len(pos) <= i {
		return nil, nil
	}
	if !json.Valid([]byte(pos[i])) {
		return nil, errBadPayload
	}
	return json.RawMessage(pos[i]), nil
}

// events runs `workron events send NAME KEY [PAYLOAD]`.
func (c *cli) events(ctx context.Context, fs *flag.FlagSet, args []string) error {
	const usage = "events: give\n  send NAME KEY [PAYLOAD]   send event NAME with key KEY (PAYLOAD: JSON)"
	if len(args) == 0 || args[0] != "send" {
		return errors.New(usage)
	}
	fs.Init("events send", flag.ContinueOnError)
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) < 2 || len(pos) > 3 {
		return errors.New(usage)
	}
	payload, err := payloadArg(pos, 2)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	rep, err := c.client.SendEvent(ctx, wire.EventRequest{Name: pos[0], Key: pos[1], Payload: payload})
	if err != nil {
		return err
	}
	return c.print(rep, func() {
		fmt.Fprintf(c.out, "event %s %s sent (seq %d): woke %d job(s)\n", pos[0], pos[1], rep.Seq, rep.Woke)
	})
}

// jobsSignal runs `workron jobs signal ID NAME [PAYLOAD]`.
func (c *cli) jobsSignal(ctx context.Context, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 || len(pos) > 3 {
		return errors.New("jobs signal: give ID NAME [PAYLOAD]")
	}
	payload, err := payloadArg(pos, 2)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	rep, err := c.client.Signal(ctx, pos[0], pos[1], payload)
	if err != nil {
		return err
	}
	return c.print(rep, func() {
		fmt.Fprintf(c.out, "signal %s sent to job %s (seq %d): woke %d\n", pos[1], pos[0], rep.Seq, rep.Woke)
	})
}

// parkedText says what a parked job waits for, as `jobs get` shows it
// ("" when it is not parked): "sleep (step nap) until 2026-11-28 10:00:00",
// "wait for event payment.settled order-42 (step settled) until ...",
// "wait for signal approve (step approve)", "invoke of child job-7 (step
// receipt)". The table's writer escapes control characters.
func parkedText(p *wire.Parked) string {
	if p == nil {
		return ""
	}
	var what string
	switch {
	case p.Kind == wire.StepWait && p.Signal != "":
		what = "wait for signal " + p.Signal
	case p.Kind == wire.StepWait:
		what = fmt.Sprintf("wait for event %s %s", p.Event, p.EventKey)
	case p.Kind == wire.StepInvoke:
		what = "invoke of child " + p.ChildID
	default:
		what = p.Kind
	}
	what += " (step " + p.Step + ")"
	if p.WakeAt != nil {
		what += " until " + p.WakeAt.Local().Format(time.DateTime)
	}
	return what
}
