package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/workron/workron/api/wire"
)

// QueueList returns one page of the queues, in name order, with their jobs
// counted by status and their limits (GET /queues); its NextCursor is ""
// after the last.
func (c *Client) QueueList(ctx context.Context, page Page) (*wire.QueueList, error) {
	var out wire.QueueList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/queues", query: page.query(), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return &out, nil
}

// Queues lists every queue with its jobs counted by status: QueueList's
// pages of 1000, followed to the last.
func (c *Client) Queues(ctx context.Context) ([]wire.Queue, error) {
	return followPages(ctx, func(ctx context.Context, p Page) ([]wire.Queue, string, error) {
		out, err := c.QueueList(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return out.Queues, out.NextCursor, nil
	})
}

// PauseQueue stops claims from a queue (POST /queues/{name}/pause); jobs
// may still be submitted to it. A queue that never held a job gives a 400
// reply (ErrInvalid). Pausing twice is harmless, so it is resent.
func (c *Client) PauseQueue(ctx context.Context, name string) (*wire.Queue, error) {
	q, err := c.queueAction(ctx, name, "pause")
	if err != nil {
		return nil, fmt.Errorf("pause queue %s: %w", name, err)
	}
	return q, nil
}

// ResumeQueue lets claims take jobs from a queue again (POST
// /queues/{name}/resume). Resuming twice is harmless, so it is resent.
func (c *Client) ResumeQueue(ctx context.Context, name string) (*wire.Queue, error) {
	q, err := c.queueAction(ctx, name, "resume")
	if err != nil {
		return nil, fmt.Errorf("resume queue %s: %w", name, err)
	}
	return q, nil
}

func (c *Client) queueAction(ctx context.Context, name, action string) (*wire.Queue, error) {
	if name == "" {
		return nil, ErrEmptyID
	}
	var out wire.Queue
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/queues/" + url.PathEscape(name) + "/" + action, out: &out, idempotent: true})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SetQueueLimits sets (replaces) a queue's flow-control limits (PUT
// /queues/{name}) and returns the queue with them; the queue needs no jobs
// yet. A limit left nil sets none; wire.QueueLimits{} removes them all.
// Bad limits give ErrInvalid naming the field. Setting the same limits
// twice is harmless, so it is resent (but a rate or burst set again
// restarts its buckets full).
func (c *Client) SetQueueLimits(ctx context.Context, name string, limits wire.QueueLimits) (*wire.Queue, error) {
	if name == "" {
		return nil, fmt.Errorf("set queue limits: %w", ErrEmptyID)
	}
	var out wire.Queue
	if _, err := c.do(ctx, call{method: http.MethodPut, path: "/queues/" + url.PathEscape(name), body: limits, out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("set limits of queue %s: %w", name, err)
	}
	return &out, nil
}

// QueueLimits returns one queue as GET /queues lists it (GET
// /queues/{name}): its counts, and in Limits its limits, what runs against
// them and how many jobs wait on each. A queue with no jobs, pause or
// limits gives IsNotFound.
func (c *Client) QueueLimits(ctx context.Context, name string) (*wire.Queue, error) {
	if name == "" {
		return nil, fmt.Errorf("get queue: %w", ErrEmptyID)
	}
	var out wire.Queue
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/queues/" + url.PathEscape(name), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("get queue %s: %w", name, err)
	}
	return &out, nil
}
