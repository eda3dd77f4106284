package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/workron/workron/api/wire"
)

// Queues lists the queues with their jobs counted by status (GET /queues).
func (c *Client) Queues(ctx context.Context) ([]wire.Queue, error) {
	var out wire.QueueList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/queues", out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return out.Queues, nil
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
