package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/workron/workron/api/wire"
)

// Durable sleeps, events, signals and child jobs (issue #31): the parking
// routes a running attempt calls under its lease, and the routes that
// send events and signals.

// errNoStep is the error of a parking reply without its step.
var errNoStep = errors.New("client: the reply names no step")

// SleepStep parks job jobID on step key until req.Until or for
// req.DurationMillis (POST /jobs/{id}/steps/{key}/sleep). Parked true:
// the attempt has ended, uncharged, and must send no report (the job runs
// again at the wake time and replays to this step). Parked false: the
// step is complete (its time passed) and the attempt goes on. A step
// recorded before (a replay) is read back with its result and returned
// as not parked. A resend is safe. A stale lease gives an error for which
// CodeOf is wire.CodeStaleLease.
func (c *Client) SleepStep(ctx context.Context, jobID, key string, req wire.SleepRequest) (*wire.ParkReply, error) {
	return c.park(ctx, jobID, key, "sleep", req)
}

// WaitStep parks job jobID on step key until the event req.Event with
// key req.Key is sent (or the signal req.Signal is sent to the job), or
// req.TimeoutMillis passes (POST /jobs/{id}/steps/{key}/wait). It
// answers as SleepStep does; a complete wait has status wire.StepOK and
// the payload as its result, or wire.StepTimeout.
func (c *Client) WaitStep(ctx context.Context, jobID, key string, req wire.WaitRequest) (*wire.ParkReply, error) {
	return c.park(ctx, jobID, key, "wait", req)
}

// InvokeStep submits req.Job as the child of job jobID for step key, once
// (a resend finds the same child, named by the reply's Step.ChildID), and
// parks the job until the child ends (POST
// /jobs/{id}/steps/{key}/invoke). It answers as SleepStep does; a
// complete invoke has status wire.StepOK and the child's result, or
// wire.StepFailed and {"status", "error"}.
func (c *Client) InvokeStep(ctx context.Context, jobID, key string, req wire.InvokeRequest) (*wire.ParkReply, error) {
	return c.park(ctx, jobID, key, "invoke", req)
}

// park sends a parking request (verb is the route's last segment).
func (c *Client) park(ctx context.Context, jobID, key, verb string, body any) (*wire.ParkReply, error) {
	if jobID == "" {
		return nil, fmt.Errorf("%s step: %w", verb, ErrEmptyID)
	}
	var out wire.ParkReply
	_, err := c.do(ctx, call{method: http.MethodPost, path: stepPath(jobID, key) + "/" + verb, body: body, out: &out, idempotent: true})
	if CodeOf(err) == wire.CodeStepRecorded {
		st, gerr := c.Step(ctx, jobID, key)
		if gerr != nil {
			return nil, fmt.Errorf("%s step %s of job %s: recorded before, and reading it: %w", verb, key, jobID, gerr)
		}
		return &wire.ParkReply{Step: *st}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s step %s of job %s: %w", verb, key, jobID, err)
	}
	if out.Step.Key == "" {
		return nil, fmt.Errorf("%s step %s of job %s: %w", verb, key, jobID, errNoStep)
	}
	return &out, nil
}

// SendEvent sends an event (POST /events): it wakes the jobs waiting for
// its name and key, and is kept for the server's look-back window for
// waits registered after it. It is not resent after a transport error
// once the request went out (a second event could satisfy a second wait).
func (c *Client) SendEvent(ctx context.Context, req wire.EventRequest) (*wire.EventReply, error) {
	var out wire.EventReply
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/events", body: req, out: &out}); err != nil {
		return nil, fmt.Errorf("send event %s %s: %w", req.Name, req.Key, err)
	}
	return &out, nil
}

// Signal sends signal name with payload (JSON; nil: none) to job jobID
// (POST /jobs/{id}/signals/{name}); an unknown job gives an error for
// which IsNotFound is true. It is not resent as SendEvent is not.
func (c *Client) Signal(ctx context.Context, jobID, name string, payload json.RawMessage) (*wire.EventReply, error) {
	if jobID == "" {
		return nil, fmt.Errorf("signal: %w", ErrEmptyID)
	}
	var out wire.EventReply
	path := jobPath(jobID, "signals/"+url.PathEscape(name))
	if _, err := c.do(ctx, call{method: http.MethodPost, path: path, body: wire.SignalRequest{Payload: payload}, out: &out}); err != nil {
		return nil, fmt.Errorf("signal %s to job %s: %w", name, jobID, err)
	}
	return &out, nil
}
