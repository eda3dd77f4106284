package client

import (
	"context"
	"net/url"
	"strconv"
)

// Page is a page of a list the server pages by name or id (GET /workers,
// /queues, /schedules): Limit items at most (0: the server's default,
// 100; it allows up to 1000) after Cursor (the NextCursor of the previous
// page; "" from the first).
type Page struct {
	Limit  int
	Cursor string
}

// query is p as a request's query.
func (p Page) query() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// followPages reads pages of 1000 with one, from the first to the last,
// and returns their items in order. A server that answers the same cursor
// again ends the walk rather than loop.
func followPages[T any](ctx context.Context, one func(context.Context, Page) ([]T, string, error)) ([]T, error) {
	var all []T
	page := Page{Limit: 1000}
	for {
		items, next, err := one(ctx, page)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" || next == page.Cursor {
			return all, nil
		}
		page.Cursor = next
	}
}
