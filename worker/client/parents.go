package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"

	"github.com/workron/workron/api/wire"
)

// ParentResults returns one page of a job's parent results (GET
// /jobs/{id}/parent_results), from cursor on: a claim reply's
// ParentResultsCursor, or the NextCursor of the page before ("" is the
// first parent). limit caps the results of the page (0: the server's
// default); the server also bounds its bytes (wire.MaxParentResultsPageBytes).
// An unknown job gives an error for which IsNotFound is true.
func (c *Client) ParentResults(ctx context.Context, id, cursor string, limit int) (*wire.ParentResultsPage, error) {
	if id == "" {
		return nil, fmt.Errorf("parent results: %w", ErrEmptyID)
	}
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out wire.ParentResultsPage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: jobPath(id, "parent_results"), query: q, out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("parent results of job %s: %w", id, err)
	}
	return &out, nil
}

// FetchParentResults completes the parent results of a job a claim reply
// cut short (job.ParentResultsTruncated): it reads the rest page by page
// from job.ParentResultsCursor, and on success sets job.ParentResults to a
// new map of them all and clears the flag and the cursor. A job that was
// not cut short is left as it is, with no request. On an error the job is
// left as it was.
func (c *Client) FetchParentResults(ctx context.Context, job *wire.Job) error {
	if !job.ParentResultsTruncated {
		return nil
	}
	all := maps.Clone(job.ParentResults)
	if all == nil {
		all = make(map[string]json.RawMessage)
	}
	// Each page but the last holds a result, and each result is a
	// parent's: a server whose cursor does not move is stopped.
	for cursor, pages := job.ParentResultsCursor, 0; ; pages++ {
		if pages > len(job.DependsOn) {
			return fmt.Errorf("parent results of job %s: more pages than its %d parents", job.ID, len(job.DependsOn))
		}
		p, err := c.ParentResults(ctx, job.ID, cursor, 0)
		if err != nil {
			return err
		}
		maps.Copy(all, p.ParentResults)
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(all) == 0 {
		all = nil
	}
	job.ParentResults, job.ParentResultsTruncated, job.ParentResultsCursor = all, false, ""
	return nil
}
