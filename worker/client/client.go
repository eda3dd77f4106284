package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
)

const (
	maxBackoff   = 2 * time.Second
	maxReplySize = 64 << 20 // bytes of a reply body we are willing to decode
	maxErrorBody = 4 << 10  // bytes of a non-JSON error body kept in Message
)

// Client calls Workron's HTTP API. It is safe for concurrent use. Close drops
// its idle connections.
type Client struct {
	servers []string
	hc      *http.Client // the configured client
	longHC  *http.Client // hc without its Timeout, for long polls
	token   string
	rounds  int
	backoff time.Duration
	log     *slog.Logger
	stale   bool          // Config.StaleReads
	cur     atomic.Uint32 // index into servers of the one to try first
}

// New validates cfg and returns a Client. A nil HTTPClient or Logger gets the
// default of DefaultConfig.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = newHTTPClient(cfg.TLS)
	}
	long := *hc
	long.Timeout = 0
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	servers := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		servers[i] = strings.TrimRight(s, "/")
	}
	return &Client{
		servers: servers,
		hc:      hc,
		longHC:  &long,
		token:   cfg.Token,
		rounds:  cfg.Rounds,
		backoff: cfg.Backoff,
		log:     log.With("component", "client"),
		stale:   cfg.StaleReads,
	}, nil
}

// Close closes the idle connections of the Client's HTTP client. The Client
// stays usable; later requests open new connections.
func (c *Client) Close() {
	c.hc.CloseIdleConnections()
}

// Server returns the base URL the next request will go to first.
func (c *Client) Server() string {
	return c.servers[int(c.cur.Load())%len(c.servers)]
}

// call is one logical API request; do may send it several times.
type call struct {
	method     string
	path       string        // escaped path, starting with "/"
	query      url.Values    // may be nil
	body       any           // JSON-encoded when not nil
	jsonBody   []byte        // an encoded JSON body, sent as is, when not nil
	prefer     string        // the Prefer header (RFC 7240), when not empty
	raw        []byte        // sent as is (application/octet-stream) instead of body when not nil
	file       io.ReadSeeker // sent from its start (application/octet-stream) on each try, when not nil
	size       int64         // file's length, sent as Content-Length when positive
	out        any           // decoded from a 2xx reply when not nil
	rawOut     *[]byte       // the reply's body as it came (an error's up to 4 KiB), when not nil
	stream     io.Writer     // a 2xx reply's body is copied here, when not nil
	streamed   *int64        // how many bytes went to stream, when not nil
	idempotent bool          // safe to resend after any transport error or 502/504
	single     bool          // this node only: no failover, no resend
	oneNode    bool          // one node's own answer: skip servers that refuse the connection, then no failover, no resend
	noTimeout  bool          // bounded by ctx only, not by the HTTP client's Timeout
	longPoll   time.Duration
}

// do sends cl to the current server, failing over as the package doc says,
// and returns the status of the 2xx reply it decoded into cl.out.
func (c *Client) do(ctx context.Context, cl call) (int, error) {
	var body []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return 0, fmt.Errorf("client: encode %s %s: %w", cl.method, cl.path, err)
		}
		body = b
	}
	if cl.jsonBody != nil {
		body = cl.jsonBody
	}
	if cl.raw != nil {
		body = cl.raw
	}
	reqID := newRequestID()
	if cl.single {
		status, _, err := c.send(ctx, c.Server(), cl, body, reqID)
		return status, err
	}
	n := len(c.servers)
	var (
		lastErr    error
		lastStatus int
	)
	for try := 0; try < c.rounds*n; try++ {
		if try > 0 && try%n == 0 {
			if err := c.pause(ctx, try/n, lastErr); err != nil {
				return lastStatus, fmt.Errorf("client: %s %s: %w (last error: %w)", cl.method, cl.path, err, lastErr)
			}
		}
		idx := c.cur.Load()
		server := c.servers[int(idx)%n]
		status, retry, err := c.send(ctx, server, cl, body, reqID)
		if err == nil {
			return status, nil
		}
		if retry == noRetry || (cl.oneNode && !isDialError(err)) {
			return status, err // oneNode: the first node that answered gave its answer
		}
		c.rotate(idx)
		if retry == rotateOnly {
			return status, err
		}
		c.log.DebugContext(ctx, "request failed, trying next server",
			"method", cl.method, "path", cl.path, "server", server, "err", err)
		lastErr, lastStatus = err, status
	}
	if c.rounds*n == 1 {
		return lastStatus, lastErr // one server tried once: its error as it is
	}
	return lastStatus, fmt.Errorf("%w (gave up after %d attempts)", lastErr, c.rounds*n)
}

// retryKind says what do makes of a failed send.
type retryKind int

const (
	noRetry    retryKind = iota // return the error as it is
	rotateOnly                  // move to the next server, but return the error
	retryNext                   // move to the next server and resend
)

// send makes one HTTP exchange with server and classifies its failure.
func (c *Client) send(ctx context.Context, server string, cl call, body []byte, reqID string) (int, retryKind, error) {
	hc := c.hc
	if cl.noTimeout {
		hc = c.longHC
	}
	if cl.longPoll > 0 {
		hc = c.longHC
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cl.longPoll)
		defer cancel()
	}
	req, err := c.newRequest(ctx, server, cl, body, reqID)
	if err != nil {
		return 0, noRetry, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		err = fmt.Errorf("client: %w", err) // a *url.Error: it names the method and URL
		switch {
		case ctx.Err() != nil:
			return 0, noRetry, err
		case cl.idempotent || isDialError(err):
			return 0, retryNext, err
		default:
			return 0, rotateOnly, err
		}
	}
	defer drain(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr, raw, readErr := decodeError(resp)
		if cl.rawOut != nil {
			*cl.rawOut = raw
		}
		var err error = apiErr
		if readErr != nil {
			err = fmt.Errorf("%w (%w: %w)", apiErr, ErrIncompleteReply, readErr)
		}
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable:
			return resp.StatusCode, retryNext, err
		case unavailable(resp.StatusCode) && cl.idempotent:
			return resp.StatusCode, retryNext, err
		case unavailable(resp.StatusCode):
			return resp.StatusCode, rotateOnly, err
		}
		return resp.StatusCode, noRetry, err
	}
	if retry, err := c.readReply(cl, server, resp); err != nil {
		return resp.StatusCode, retry, err
	}
	return resp.StatusCode, noRetry, nil
}

// readReply reads a 2xx reply into cl.rawOut, cl.stream or cl.out.
func (c *Client) readReply(cl call, server string, resp *http.Response) (retryKind, error) {
	switch {
	case cl.rawOut != nil:
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxReplySize))
		if err != nil {
			return c.badReply(cl, server, err)
		}
		*cl.rawOut = b
	case cl.stream != nil:
		n, err := io.Copy(cl.stream, resp.Body)
		if cl.streamed != nil {
			*cl.streamed = n
		}
		if err != nil {
			// Bytes may have reached the stream: never resent.
			return noRetry, fmt.Errorf("client: %s %s%s: %w: %w", cl.method, server, cl.path, ErrIncompleteReply, err)
		}
	case cl.out != nil && resp.StatusCode != http.StatusNoContent:
		dec := json.NewDecoder(io.LimitReader(resp.Body, maxReplySize))
		if err := dec.Decode(cl.out); err != nil {
			return c.badReply(cl, server, err)
		}
	}
	return noRetry, nil
}

// badReply classifies a 2xx reply whose body did not decode. One that is
// empty or ends early (the connection broke, or the node stopped while it
// answered) is never a success: its outcome is unknown, like a connection
// that broke after the request was sent (ErrIncompleteReply).
func (c *Client) badReply(cl call, server string, err error) (retryKind, error) {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	if errors.As(err, &se) || errors.As(err, &te) {
		return noRetry, fmt.Errorf("client: decode reply of %s %s: %w", cl.method, cl.path, err)
	}
	err = fmt.Errorf("client: %s %s%s: %w: %w", cl.method, server, cl.path, ErrIncompleteReply, err)
	if cl.idempotent {
		return retryNext, err
	}
	return rotateOnly, err
}

func (c *Client) newRequest(ctx context.Context, server string, cl call, body []byte, reqID string) (*http.Request, error) {
	target := server + cl.path
	if q := c.readQuery(cl); len(q) > 0 {
		target += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	if cl.file != nil {
		if _, err := cl.file.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("client: rewind the body of %s %s: %w", cl.method, target, err)
		}
		rd = io.NopCloser(cl.file) // the caller closes the file, not the transport
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("client: build %s %s: %w", cl.method, target, err)
	}
	if cl.file != nil && cl.size > 0 {
		req.ContentLength = cl.size
	}
	switch {
	case cl.raw != nil, cl.file != nil:
		req.Header.Set("Content-Type", "application/octet-stream")
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "workron-client")
	req.Header.Set("X-Request-Id", reqID)
	if cl.prefer != "" {
		req.Header.Set(wire.HeaderPrefer, cl.prefer)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// rotate moves the current server past idx, unless another goroutine already
// moved it.
func (c *Client) rotate(idx uint32) {
	next := (idx + 1) % uint32(len(c.servers))
	if c.cur.CompareAndSwap(idx, next) && len(c.servers) > 1 {
		c.log.Debug("failing over", "from", c.servers[idx], "to", c.servers[next])
	}
}

// pause waits before round (1-based) r, honouring the server's Retry-After
// up to maxBackoff. It returns ctx's error when ctx ends first.
func (c *Client) pause(ctx context.Context, r int, lastErr error) error {
	d := c.backoff << (r - 1)
	var ae *Error
	if errors.As(lastErr, &ae) && ae.RetryAfter > d {
		d = ae.RetryAfter
	}
	d = min(d, maxBackoff)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// isDialError reports whether err happened before any byte of the request
// was sent: the connection could not be made.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// decodeError makes the *Error of a reply outside 2xx. It also returns the
// start of the body as it came, and the error that cut reading it short.
func decodeError(resp *http.Response) (*Error, []byte, error) {
	ae := &Error{Status: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if secs, err := strconv.Atoi(s); err == nil && secs > 0 {
			ae.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var we wire.Error
	if json.Unmarshal(raw, &we) == nil && (we.Error != "" || we.Code != "") {
		ae.Code, ae.Message = we.Code, we.Error
		return ae, raw, readErr
	}
	ae.Message = strings.TrimSpace(string(raw))
	if ae.Message == "" {
		ae.Message = http.StatusText(resp.StatusCode)
	}
	return ae, raw, readErr
}

// drain reads a little of what is left of body so the connection can be
// reused, then closes it.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// newRequestID returns a random id sent as X-Request-Id; every resend of
// one call carries the same id, so a server can recognise a retry.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
