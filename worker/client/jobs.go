package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/workron/workron/api/wire"
)

// Submit creates a job (POST /jobs) and returns it. When req carries an
// IdempotencyKey that matches an existing job, the server creates nothing and
// Submit returns that job; use SubmitWithStatus to tell the two apart. A
// submit with an IdempotencyKey is retried on any transport error; one
// without is not retried once the request may have reached a server.
func (c *Client) Submit(ctx context.Context, req wire.SubmitRequest) (*wire.Job, error) {
	job, _, err := c.SubmitWithStatus(ctx, req)
	return job, err
}

// SubmitWithStatus is Submit that also reports whether the job was created
// (201) rather than found by its idempotency key (200).
func (c *Client) SubmitWithStatus(ctx context.Context, req wire.SubmitRequest) (job *wire.Job, created bool, err error) {
	var out wire.Job
	status, err := c.do(ctx, call{
		method: http.MethodPost, path: "/jobs", body: req, out: &out,
		idempotent: req.IdempotencyKey != "",
	})
	if err != nil {
		return nil, false, fmt.Errorf("submit job: %w", err)
	}
	return &out, status == http.StatusCreated, nil
}

// SubmitGang creates a gang of req.GangSize tasks (POST /jobs with
// gang_size) and returns its id and its tasks' job ids. It is retried like
// Submit.
func (c *Client) SubmitGang(ctx context.Context, req wire.SubmitRequest) (*wire.GangSubmitResponse, error) {
	if req.GangSize < 1 {
		return nil, fmt.Errorf("submit gang: gang_size must be at least 1, got %d", req.GangSize)
	}
	var out wire.GangSubmitResponse
	_, err := c.do(ctx, call{
		method: http.MethodPost, path: "/jobs", body: req, out: &out,
		idempotent: req.IdempotencyKey != "",
	})
	if err != nil {
		return nil, fmt.Errorf("submit gang of %d: %w", req.GangSize, err)
	}
	return &out, nil
}

// SubmitBatch creates several jobs in one request (POST /jobs/batch) and
// returns them in the order of reqs. It is retried like Submit, as
// idempotent only when every request carries an IdempotencyKey. It drops
// the reply's warnings; SubmitBatchReply returns them.
func (c *Client) SubmitBatch(ctx context.Context, reqs []wire.SubmitRequest) ([]wire.Job, error) {
	list, err := c.SubmitBatchReply(ctx, reqs)
	if err != nil {
		return nil, err
	}
	return list.Jobs, nil
}

// SubmitBatchReply is SubmitBatch that returns the whole reply: the jobs in
// the order of reqs, and the Warnings that name what the server ignored in
// the request (an unknown field, e.g. `unknown field "jobs[1].priorty"`;
// the jobs were created all the same).
func (c *Client) SubmitBatchReply(ctx context.Context, reqs []wire.SubmitRequest) (*wire.JobList, error) {
	var out wire.JobList
	if err := c.submitBatch(ctx, reqs, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitBatchIDs is SubmitBatch that returns only the jobs' ids, in the
// order of reqs: it asks for the server's minimal reply (Prefer:
// return=minimal), about a dozen bytes a job to read instead of a few
// hundred. Where an IdempotencyKey matched a retained job, the id is that
// job's, as SubmitBatch would return that job. From a server that answers
// the jobs anyway (a release before the minimal reply), it returns their
// ids. It drops the reply's warnings; SubmitBatchIDsReply returns them.
func (c *Client) SubmitBatchIDs(ctx context.Context, reqs []wire.SubmitRequest) ([]string, error) {
	r, err := c.SubmitBatchIDsReply(ctx, reqs)
	if err != nil {
		return nil, err
	}
	return r.IDs, nil
}

// SubmitBatchIDsReply is SubmitBatchIDs that returns the whole minimal
// reply: the ids, and the Warnings as SubmitBatchReply returns them.
func (c *Client) SubmitBatchIDsReply(ctx context.Context, reqs []wire.SubmitRequest) (*wire.BatchSubmitIDs, error) {
	var out struct {
		wire.BatchSubmitIDs
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if err := c.submitBatch(ctx, reqs, wire.PreferMinimal, &out); err != nil {
		return nil, err
	}
	if out.IDs == nil && out.Jobs != nil {
		out.IDs = make([]string, len(out.Jobs))
		for i, j := range out.Jobs {
			out.IDs[i] = j.ID
		}
	}
	return &out.BatchSubmitIDs, nil
}

// submitBatch sends POST /jobs/batch with the Prefer header prefer (none
// when empty) and decodes the reply into out.
func (c *Client) submitBatch(ctx context.Context, reqs []wire.SubmitRequest, prefer string, out any) error {
	keyed := len(reqs) > 0
	for _, r := range reqs {
		keyed = keyed && r.IdempotencyKey != ""
	}
	_, err := c.do(ctx, call{
		method: http.MethodPost, path: "/jobs/batch",
		body: wire.BatchSubmitRequest{Jobs: reqs}, prefer: prefer, out: out, idempotent: keyed,
	})
	if err != nil {
		return fmt.Errorf("submit batch of %d jobs: %w", len(reqs), err)
	}
	return nil
}

// Get returns the job with the given id (GET /jobs/{id}). An unknown id gives
// an error for which IsNotFound is true.
func (c *Client) Get(ctx context.Context, id string) (*wire.Job, error) {
	if id == "" {
		return nil, fmt.Errorf("get job: %w", ErrEmptyID)
	}
	var out wire.Job
	if _, err := c.do(ctx, call{method: http.MethodGet, path: jobPath(id, ""), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return &out, nil
}

// ListOptions filter and page GET /jobs (and GET /jobs/count, which takes
// no Limit). Zero fields are left out; every one given must hold.
type ListOptions struct {
	// Filter is an expression of the filter language (docs/api.md,
	// Filters), e.g. `status == "failed" and queue == "emails"`.
	Filter string
	Status string // one of the wire.Status* values, or "scheduled"
	Queue  string
	Limit  int    // page size; the server applies its default and cap
	Cursor string // NextCursor of the previous page
	// Metadata keeps only jobs whose metadata holds every pair
	// (metadata.K=V in the query).
	Metadata map[string]string
}

// List returns one page of jobs, newest first (GET /jobs). A page may hold
// fewer than Limit jobs with a NextCursor when the server's scan budget ran
// out first (Partial); ask again from NextCursor for the rest.
func (c *Client) List(ctx context.Context, opts ListOptions) (*wire.JobList, error) {
	var out wire.JobList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/jobs", query: opts.query(true), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return &out, nil
}

// Count counts the jobs opts keeps, by status (GET /jobs/count; Limit is
// not used). A count that is not Exact covers the jobs up to NextCursor:
// ask again from there and add the counts up.
func (c *Client) Count(ctx context.Context, opts ListOptions) (*wire.JobCount, error) {
	var out wire.JobCount
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/jobs/count", query: opts.query(false), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return &out, nil
}

// query is opts as GET /jobs's query, with the limit or not.
func (opts ListOptions) query(limit bool) url.Values {
	q := url.Values{}
	if opts.Filter != "" {
		q.Set("filter", opts.Filter)
	}
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	if opts.Queue != "" {
		q.Set("queue", opts.Queue)
	}
	if limit && opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	for k, v := range opts.Metadata {
		q.Set("metadata."+k, v)
	}
	return q
}

// Cancel asks the server to cancel a job (POST /jobs/{id}/cancel) and returns
// the job as the server replied, or nil when it sent no body. A running job
// becomes "cancelling" until its worker stops it. Cancelling a job that
// already finished is a conflict (IsConflict).
func (c *Client) Cancel(ctx context.Context, id string) (*wire.Job, error) {
	return c.CancelWith(ctx, id, ActionOptions{})
}

// ActionOptions change what Cancel and Retry do to a job's dependents.
type ActionOptions struct {
	// NoCascade (?cascade=false) leaves the dependents alone: a cancel does
	// not cancel the pending and blocked jobs that wait for the job, and a
	// retry does not send the dependents that ended with it back to
	// blocked.
	NoCascade bool
}

// CancelWith is Cancel with options.
func (c *Client) CancelWith(ctx context.Context, id string, opts ActionOptions) (*wire.Job, error) {
	job, err := c.jobAction(ctx, id, "cancel", opts)
	if err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", id, err)
	}
	return job, nil
}

// Retry puts a failed or cancelled job back in its queue (POST
// /jobs/{id}/retry) and returns the job, or nil when the server sent no body.
func (c *Client) Retry(ctx context.Context, id string) (*wire.Job, error) {
	return c.RetryWith(ctx, id, ActionOptions{})
}

// RetryWith is Retry with options. The default cascade needs every node at
// protocol 2: during an upgrade it gives a 503 upgrade_in_progress
// (IsUnavailable), and NoCascade works.
func (c *Client) RetryWith(ctx context.Context, id string, opts ActionOptions) (*wire.Job, error) {
	job, err := c.jobAction(ctx, id, "retry", opts)
	if err != nil {
		return nil, fmt.Errorf("retry job %s: %w", id, err)
	}
	return job, nil
}

func (c *Client) jobAction(ctx context.Context, id, action string, opts ActionOptions) (*wire.Job, error) {
	if id == "" {
		return nil, ErrEmptyID
	}
	var q url.Values
	if opts.NoCascade {
		q = url.Values{"cascade": {"false"}}
	}
	var out *wire.Job
	_, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, action), query: q, body: struct{}{}, out: &out})
	return out, err
}

// Gang returns a gang with its tasks (GET /gangs/{id}). An unknown id gives
// IsNotFound.
func (c *Client) Gang(ctx context.Context, id string) (*wire.Gang, error) {
	if id == "" {
		return nil, fmt.Errorf("get gang: %w", ErrEmptyID)
	}
	var out wire.Gang
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/gangs/" + url.PathEscape(id), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("get gang %s: %w", id, err)
	}
	return &out, nil
}

// Wait polls Get every poll (500ms when poll <= 0) until the job is done,
// failed or cancelled, and returns it. It keeps polling through transport
// errors and 5xx replies (a failover), and returns at once on any other API
// error or when ctx ends.
func (c *Client) Wait(ctx context.Context, id string, poll time.Duration) (*wire.Job, error) {
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		job, err := c.Get(ctx, id)
		switch {
		case err == nil && Terminal(job.Status):
			return job, nil
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("wait for job %s: %w", id, ctx.Err())
		case err != nil && !transient(err):
			return nil, fmt.Errorf("wait for job %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for job %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// Terminal reports whether status is final: done, failed or cancelled.
func Terminal(status string) bool {
	return status == wire.StatusDone || status == wire.StatusFailed || status == wire.StatusCancelled
}

// transient reports whether err may go away by itself: a transport error or
// a 5xx or 429 reply.
func transient(err error) bool {
	var ae *Error
	if !errors.As(err, &ae) {
		return !errors.Is(err, ErrEmptyID)
	}
	return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
}

// jobPath returns /jobs/{id}[/action] with id escaped as one path segment.
func jobPath(id, action string) string {
	p := "/jobs/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p
}
