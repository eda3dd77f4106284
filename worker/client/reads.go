package client

import (
	"net/http"
	"net/url"
	"strings"
)

// readRoutes are the path prefixes of the reads ?stale=1 applies to
// (docs/api.md, Reads on any node).
var readRoutes = []string{"/jobs", "/gangs", "/workers", "/queues", "/pauses", "/schedules"}

// isRead reports whether a GET of path is one of the reads.
func isRead(path string) bool {
	if path == "/jobs/next" { // claims
		return false
	}
	for _, p := range readRoutes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// readQuery is cl's query, with stale=1 added to a read when the Client
// makes stale reads.
func (c *Client) readQuery(cl call) url.Values {
	if !c.stale || cl.method != http.MethodGet || !isRead(cl.path) || cl.query.Has("stale") {
		return cl.query
	}
	q := make(url.Values, len(cl.query)+1)
	for k, v := range cl.query {
		q[k] = v
	}
	q.Set("stale", "1")
	return q
}
