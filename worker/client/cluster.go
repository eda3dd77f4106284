package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/workron/workron/api/wire"
)

// Cluster returns the members as the answering node sees them, each with
// its health as that node probed it just now (GET /cluster).
func (c *Client) Cluster(ctx context.Context) (*wire.Cluster, error) {
	var out wire.Cluster
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/cluster", out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("cluster status: %w", err)
	}
	return &out, nil
}

// Join adds a node to the cluster (POST /cluster/join; the admin role): a
// new node joins as a non-voter, and the reply's Role says whether it
// became a voter within the server's wait ("nonvoter" if not yet). It is not resent once the request may have reached a
// server: a membership change is never replayed.
func (c *Client) Join(ctx context.Context, req wire.JoinRequest) (*wire.Node, error) {
	var out wire.Node
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/cluster/join", body: req, out: &out}); err != nil {
		return nil, fmt.Errorf("join node %s: %w", req.ID, err)
	}
	return &out, nil
}

// RemoveNode takes a member out of the cluster (DELETE
// /cluster/nodes/{id}; the admin role) and returns what happened; when the
// member leads, it hands leadership over first. An unknown id gives
// IsNotFound. Removal is nil when the server (an older release) answered
// 204 without a body.
func (c *Client) RemoveNode(ctx context.Context, id string) (*wire.Removal, error) {
	if id == "" {
		return nil, fmt.Errorf("remove node: %w", ErrEmptyID)
	}
	var out *wire.Removal
	if _, err := c.do(ctx, call{method: http.MethodDelete, path: "/cluster/nodes/" + url.PathEscape(id), out: &out}); err != nil {
		return nil, fmt.Errorf("remove node %s: %w", id, err)
	}
	return out, nil
}

// Health asks one node how it is (GET /health, or GET /health?ready=1 when
// ready): the first server, from Server() on, that takes the connection.
// Servers that refuse it are skipped as for every request (so the default
// list of the CLI finds a running node); once a node answers, its answer
// is the answer, never another node's. A node that answers 503 (no leader,
// removed, catching up) returns its Health together with an error wrapping
// the *Error, for which IsUnavailable is true.
func (c *Client) Health(ctx context.Context, ready bool) (*wire.Health, error) {
	var q url.Values
	if ready {
		q = url.Values{"ready": {"1"}}
	}
	var body []byte
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/health", query: q, rawOut: &body, oneNode: true})
	var ae *Error
	if err != nil && !errors.As(err, &ae) {
		return nil, fmt.Errorf("health: %w", err) // no reply; err names the server it last tried
	}
	var h wire.Health
	if jerr := json.Unmarshal(body, &h); jerr != nil || h.Status == "" {
		if err == nil {
			err = fmt.Errorf("client: decode reply of GET /health: %w", jerr)
		}
		return nil, fmt.Errorf("health of %s: %w", c.Server(), err)
	}
	if err != nil {
		return &h, fmt.Errorf("health of %s: %w", c.Server(), err)
	}
	return &h, nil
}

// Digest returns a hash of one node's state with the applied index it
// belongs to (GET /debug/digest), asking the node as Health does: the first
// server that takes the connection. Two nodes that report the same applied
// index must report the same digest.
func (c *Client) Digest(ctx context.Context) (*wire.Digest, error) {
	var out wire.Digest
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/debug/digest", out: &out, oneNode: true}); err != nil {
		var ae *Error
		if !errors.As(err, &ae) {
			return nil, fmt.Errorf("digest: %w", err) // no reply; err names the server it last tried
		}
		return nil, fmt.Errorf("digest of %s: %w", c.Server(), err)
	}
	return &out, nil
}

// Backup writes a consistent copy of the cluster's state to w (GET
// /backup; the admin role) and returns how many bytes it wrote. It is
// bounded by ctx only, not by the HTTP client's Timeout. It fails over
// like a read until the reply starts; a reply that breaks off after that
// is not resent (ErrIncompleteReply) and w holds a partial copy.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	var n int64
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/backup", stream: w, streamed: &n, idempotent: true, noTimeout: true}); err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}

// Restore replaces the cluster's state with a backup read from r (POST
// /restore; the admin role), size bytes long, through Raft to every node,
// and returns what it restored. r is read from its start on each try. The
// server verifies the backup first and refuses one that is not whole with a
// 400 bad_backup (ErrInvalid), changing nothing. The server streams r to
// its disk, never into memory: a backup over its limit (16 GiB) or its
// disk's room is ErrTooLarge, and one sent while another restore is
// received on that node is ErrConflict (retry after a while). Restoring the
// same backup again gives the same state, so it is resent like a read. It
// is bounded by ctx only.
func (c *Client) Restore(ctx context.Context, r io.ReadSeeker, size int64) (*wire.Restore, error) {
	var out wire.Restore
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/restore", file: r, size: size, out: &out, idempotent: true, noTimeout: true})
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	return &out, nil
}
