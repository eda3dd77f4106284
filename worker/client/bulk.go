package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/workron/workron/api/wire"
)

// CountBulk counts the jobs a bulk request's filters match now (POST /bulk
// with dry_run) and starts nothing. Counting is a read, so it is resent.
func (c *Client) CountBulk(ctx context.Context, req wire.BulkRequest) (*wire.BulkCount, error) {
	req.DryRun = true
	var out wire.BulkCount
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/bulk", body: req, out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("count bulk %s: %w", req.Action, err)
	}
	return &out, nil
}

// StartBulk starts a bulk action (POST /bulk): req.Action for every job
// its filters match, applied by the leader in chunks. It returns the
// action, whose progress GetBulk shows. It is not resent once the request
// may have reached a server (a second would start a second action); a bad
// field gives ErrInvalid, and more than 4 running a conflict.
func (c *Client) StartBulk(ctx context.Context, req wire.BulkRequest) (*wire.Bulk, error) {
	req.DryRun = false
	var out wire.Bulk
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/bulk", body: req, out: &out}); err != nil {
		return nil, fmt.Errorf("start bulk %s: %w", req.Action, err)
	}
	return &out, nil
}

// GetBulk returns a bulk action with its progress (GET /bulk/{id}); an
// unknown id gives IsNotFound.
func (c *Client) GetBulk(ctx context.Context, id string) (*wire.Bulk, error) {
	if id == "" {
		return nil, fmt.Errorf("get bulk: %w", ErrEmptyID)
	}
	var out wire.Bulk
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/bulk/" + url.PathEscape(id), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("get bulk %s: %w", id, err)
	}
	return &out, nil
}

// Bulks lists the bulk actions the cluster keeps (GET /bulk), newest
// first.
func (c *Client) Bulks(ctx context.Context) ([]wire.Bulk, error) {
	var out wire.BulkList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/bulk", out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("list bulk actions: %w", err)
	}
	return out.Bulks, nil
}

// StopBulk stops a running bulk action before its next chunk (POST
// /bulk/{id}/stop) and returns it; stopping twice is harmless, so it is
// resent.
func (c *Client) StopBulk(ctx context.Context, id string) (*wire.Bulk, error) {
	if id == "" {
		return nil, fmt.Errorf("stop bulk: %w", ErrEmptyID)
	}
	var out wire.Bulk
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/bulk/" + url.PathEscape(id) + "/stop", body: struct{}{}, out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("stop bulk %s: %w", id, err)
	}
	return &out, nil
}
