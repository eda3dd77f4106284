package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Request is one call of Do: a route of the API that has no method of its
// own, or a call whose reply the caller classifies itself (a load
// generator, a test harness).
type Request struct {
	Method string     // "GET", "POST", ...
	Path   string     // escaped, starting with "/", such as "/jobs/job-1"
	Query  url.Values // may be nil
	Body   any        // sent as JSON when not nil
	// JSON is a body already encoded as JSON, sent as is instead of Body
	// when not nil (a load generator's prepared requests).
	JSON []byte
	// Idempotent marks a write that is safe to resend after any transport
	// error or a 502 or 504 reply; GET requests always are, except GET
	// /jobs/next, which claims.
	Idempotent bool
	// Single sends the request to Server() once: no failover and no resend,
	// whatever the reply. For node-local routes (/health, /debug/digest)
	// and for callers that count every exchange.
	Single bool
}

// Response is a reply as it came.
type Response struct {
	// Status is the HTTP status, 0 when no server answered.
	Status int
	// Body is the reply's body: all of a 2xx reply (up to 64 MiB), the
	// start (4 KiB) of any other.
	Body []byte
}

// Do sends req as the named methods send theirs, failing over and resending
// as the package doc says, and returns the last reply. The error is nil for
// a 2xx reply; it wraps an *Error for any other (Response holds its body as
// well), and is a transport error, ErrIncompleteReply or ctx's error when no
// whole reply came (Status 0, or a 2xx Status whose body was cut short: the
// outcome is unknown).
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	if req.Method == "" || !strings.HasPrefix(req.Path, "/") {
		return &Response{}, fmt.Errorf("client: Request needs a Method and a Path starting with /, got %q %q", req.Method, req.Path)
	}
	resp := &Response{}
	status, err := c.do(ctx, call{
		method: req.Method, path: req.Path, query: req.Query, body: req.Body, jsonBody: req.JSON, rawOut: &resp.Body,
		idempotent: req.Idempotent || (req.Method == http.MethodGet && req.Path != "/jobs/next"), single: req.Single,
	})
	resp.Status = status
	var ae *Error
	if err != nil && !errors.As(err, &ae) && status/100 != 2 {
		resp.Status, resp.Body = 0, nil // no reply: a transport error
	}
	return resp, err
}
