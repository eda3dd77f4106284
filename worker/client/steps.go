package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/workron/workron/api/wire"
)

// RecordStep records step key of a running attempt's journal (PUT
// /jobs/{id}/steps/{key}) and returns the step as the journal keeps it:
// this record's (created true), or the one recorded before it (created
// false, read with its result), which the caller must use instead of its
// own. A resend after an unknown outcome is safe: it finds the first
// record. A stale lease gives an error for which CodeOf is
// wire.CodeStaleLease; a full journal, wire.CodeJournalFull.
func (c *Client) RecordStep(ctx context.Context, jobID, key string, req wire.StepRequest) (step *wire.Step, created bool, err error) {
	if jobID == "" {
		return nil, false, fmt.Errorf("record step: %w", ErrEmptyID)
	}
	var out wire.Step
	_, err = c.do(ctx, call{method: http.MethodPut, path: stepPath(jobID, key), body: req, out: &out, idempotent: true})
	if CodeOf(err) == wire.CodeStepRecorded {
		st, gerr := c.Step(ctx, jobID, key)
		if gerr != nil {
			return nil, false, fmt.Errorf("record step %s of job %s: recorded before, and reading it: %w", key, jobID, gerr)
		}
		return st, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("record step %s of job %s: %w", key, jobID, err)
	}
	return &out, true, nil
}

// Step returns one recorded step with its result (GET
// /jobs/{id}/steps/{key}); a step not recorded (or an unknown job) gives
// an error for which IsNotFound is true.
func (c *Client) Step(ctx context.Context, jobID, key string) (*wire.Step, error) {
	if jobID == "" {
		return nil, fmt.Errorf("step: %w", ErrEmptyID)
	}
	var out wire.Step
	if _, err := c.do(ctx, call{method: http.MethodGet, path: stepPath(jobID, key), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("step %s of job %s: %w", key, jobID, err)
	}
	return &out, nil
}

// Steps returns one page of a job's journal (GET /jobs/{id}/steps) in
// step key order, without results, from cursor on (a NextCursor; "" from
// the first); limit caps the page (0: the server's default of 100).
func (c *Client) Steps(ctx context.Context, jobID, cursor string, limit int) (*wire.StepList, error) {
	return c.steps(ctx, jobID, cursor, limit, false)
}

// StepsWithResults is Steps with each step's result (GET
// /jobs/{id}/steps?results=1): the server also ends a page before its
// results pass wire.MaxStepPageResultBytes (at least one step), so a
// page may hold fewer than limit steps with more to follow.
func (c *Client) StepsWithResults(ctx context.Context, jobID, cursor string, limit int) (*wire.StepList, error) {
	return c.steps(ctx, jobID, cursor, limit, true)
}

func (c *Client) steps(ctx context.Context, jobID, cursor string, limit int, results bool) (*wire.StepList, error) {
	if jobID == "" {
		return nil, fmt.Errorf("steps: %w", ErrEmptyID)
	}
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if results {
		q.Set("results", "1")
	}
	var out wire.StepList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: jobPath(jobID, "steps"), query: q, out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	return &out, nil
}

func stepPath(jobID, key string) string { return jobPath(jobID, "steps/"+url.PathEscape(key)) }
