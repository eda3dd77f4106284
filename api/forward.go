package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/traceparent"
	"github.com/workron/workron/raftnode"
)

// Headers the API sets or reads.
const (
	headerLeader    = "X-Workron-Leader"
	headerForwarded = "X-Workron-Forwarded"
	headerRequestID = "X-Request-Id" // canonical: Header.Get and Set use it without allocating
	headerBusy      = "X-Workron-Busy"
)

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyTarget
	keyTokenName
	keyTry
	keyCall
)

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
}

// newProxy forwards a request to the leader whose URL is in its context,
// with the forwardTry of its context recording how it went: a dial failure,
// or a 503 from the leader (which means nothing was done), is left for
// serveLeader to retry; any later failure leaves the outcome unknown (504).
func (s *Server) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(keyTarget).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(headerForwarded, s.node.ID())
			// This node checked where a browser sent it from
			// (withBrowserGuard); the leader, whose Host is another, would
			// take this node's own page for another origin's.
			for _, h := range browserOriginHeaders {
				pr.Out.Header.Del(h)
			}
			pr.Out.Header.Set(headerRequestID, requestID(pr.In.Context()))
			if s.tracer != nil { // the leader's span is this node's child
				traceparent.Inject(pr.In.Context(), pr.Out.Header)
			}
		},
		Transport:     newTransport(),
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(headerLeader, resp.Request.URL.Host)
			// The leader echoes the id this node sent, which withRequestID
			// has already set: the reply carries it once.
			resp.Header.Del(headerRequestID)
			try := resp.Request.Context().Value(keyTry).(*forwardTry)
			// A busy leader is left to the client to retry, after
			// Retry-After: resending the body at once adds to the load.
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(headerBusy) == "" && try.mayRetry() {
				return errLeaderUnavailable
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			try := r.Context().Value(keyTry).(*forwardTry)
			switch {
			case errors.Is(err, errLeaderUnavailable), isDialError(err):
				try.retry = true
			case r.Context().Err() != nil && s.isDraining():
				writeUnknownOutcome(w, "this node stopped while the leader was handling the request")
			default:
				writeUnknownOutcome(w, "lost the connection to the leader: "+err.Error())
			}
		},
	}
}

// errLeaderUnavailable is a 503 from the leader: nothing was done there.
var errLeaderUnavailable = errors.New("api: the leader answered 503")

// errDraining cancels the forwarded long-polls of a node that stops.
var errDraining = errors.New("api: this node is shutting down")

// isDialError reports whether err happened before any byte of the request
// was sent: the connection could not be made.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// forwardTry is one attempt to forward a request.
type forwardTry struct {
	until time.Time // retrying a 503 is allowed until then
	retry bool      // nothing was done: the caller may try again
}

func (t *forwardTry) mayRetry() bool { return time.Now().Before(t.until) }

// leaderCall is one request that needs the leader, its body read in full
// (so a slow client holds no connection to the leader, and the request can
// be sent again when nothing was done).
type leaderCall struct {
	local func(http.ResponseWriter, *http.Request) // serves it on the leader
	body  []byte
	// file, when set, is the body instead, size bytes of it: a backup
	// received on disk (POST /restore), read from its start on each try,
	// never held in memory.
	file  io.ReaderAt
	size  int64
	until time.Time // wait for a leader until then (--leader-wait)
	// replay allows serving the request again (here or elsewhere) after the
	// leader it ran on lost its leadership before proposing anything.
	replay bool
	// touched is set once a proposal may have taken effect: from then on
	// the request is never replayed.
	touched atomic.Bool
	// again is set by fail when the local run did nothing and wrote
	// nothing because leadership moved: serveLeader tries again.
	again bool
}

// reader is the body to forward: an io.NopCloser over a bytes.Reader,
// which net/http's transport knows is in memory and so sends with the
// headers in one write (any other reader has the headers flushed first);
// or over the file, streamed from its start.
func (c *leaderCall) reader() io.ReadCloser {
	if c.file != nil {
		return io.NopCloser(io.NewSectionReader(c.file, 0, c.size))
	}
	return io.NopCloser(bytes.NewReader(c.body))
}

// length is the body's length in bytes.
func (c *leaderCall) length() int64 {
	if c.file != nil {
		return c.size
	}
	return int64(len(c.body))
}

// localBody is the body to serve here.
func (c *leaderCall) localBody() io.ReadCloser {
	if c.file != nil {
		return c.reader()
	}
	return &callBody{Reader: bytes.NewReader(c.body), body: c.body}
}

// callBody is a leaderCall's body, read again on this node: readBody
// takes its bytes as they are rather than copying them once more.
// Nothing writes to them.
type callBody struct {
	*bytes.Reader
	body []byte
}

func (*callBody) Close() error { return nil }

func callOf(ctx context.Context) *leaderCall {
	c, _ := ctx.Value(keyCall).(*leaderCall)
	return c
}

// markTouched records that a proposal of the request may have taken effect.
func markTouched(ctx context.Context) {
	if c := callOf(ctx); c != nil {
		c.touched.Store(true)
	}
}

// retryAfterNotLeader reports whether fail should leave the request to
// serveLeader, which waits for the new leader and serves it there, rather
// than answer 503: nothing was proposed, the leadership moved away, the
// request came from a client (not forwarded by a peer, which retries
// itself) and the leader wait has time left.
func retryAfterNotLeader(r *http.Request, err error) bool {
	c := callOf(r.Context())
	if c == nil || !c.replay || c.touched.Load() || r.Header.Get(headerForwarded) != "" || !time.Now().Before(c.until) {
		return false
	}
	if !errors.Is(err, raftnode.ErrNotLeader) && !errors.Is(err, raftnode.ErrShutdown) {
		return false
	}
	c.again = true
	return true
}

// leaderURL is the leader's HTTP base URL, if this node knows it and the
// leader is another node.
func (s *Server) leaderURL() (*url.URL, bool) {
	id, _ := s.node.Leader()
	if id == "" || id == s.node.ID() {
		return nil, false
	}
	nodes, err := s.state.Nodes()
	if err != nil {
		return nil, false
	}
	for _, n := range nodes {
		if n.ID == id && n.HTTP != "" {
			u, err := url.Parse(n.HTTP)
			return u, err == nil
		}
	}
	return nil, false
}

// leaderRoute wraps a handler that must run on the leader. It reads the
// body in full (at most limit bytes, 413 beyond; within the node's body
// budget, 503 busy beyond, see readHeld) before anything else, and holds
// its share of the budget until the request is answered; then it
// serves the request here if this node leads, else forwards it to the
// leader; with no leader known it waits for one up to LeaderWait. replay
// says whether the handler may run again after it proposed nothing because
// leadership moved (false for handlers that change the cluster other than
// through proposals).
func (s *Server) leaderRoute(limit int64, replay bool, local http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, release, err := s.readHeld(w, r, limit)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer release()
		c := &leaderCall{local: local, body: body, until: time.Now().Add(s.cfg.LeaderWait), replay: replay}
		s.serveLeader(w, r.WithContext(context.WithValue(r.Context(), keyCall, c)), c)
	}
}

// leaderWrite wraps a handler that proposes commands and reads a body of
// at most MaxBodyBytes.
func (s *Server) leaderWrite(h http.HandlerFunc) http.HandlerFunc {
	return s.leaderRoute(s.cfg.MaxBodyBytes, true, h)
}

// leaderRead wraps a read served by the leader after it checks with a
// quorum that it still leads (GET /backup; a consistent read when the
// leader is of a release without GET /cluster/read_index, see reads.go);
// ?stale=1 serves this node's state.
func (s *Server) leaderRead(h http.HandlerFunc) http.HandlerFunc {
	verified := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := s.node.VerifyLeader(ctx); err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r)
	}
	consistent := s.leaderRoute(s.cfg.MaxBodyBytes, true, verified)
	return func(w http.ResponseWriter, r *http.Request) {
		if stale := r.URL.Query().Get("stale"); stale == "1" || stale == "true" {
			h(w, r)
			return
		}
		consistent(w, r)
	}
}

// serveLeader serves c here while this node leads, else forwards it to the
// leader. While no leader is known, or the leader could not be reached or
// said nothing was done, it waits for the leader to change (or a moment)
// and tries again, until c.until; then it answers 503. Once this node is
// removed from the cluster it answers 503 removed at once: the leader it
// lost will not come back to it.
func (s *Server) serveLeader(w http.ResponseWriter, r *http.Request, c *leaderCall) {
	ctx := r.Context()
	for {
		// Without a known leader, its address may arrive with the next
		// applied entry; after a failed try, only a new leader or time helps.
		addressWanted := false
		if s.node.Removed() {
			// Removed while it waited: no leader will come back to it.
			writeError(w, wire.CodeRemoved, s.removedMessage())
			return
		}
		if s.node.IsLeader() {
			c.again = false
			r.Body = c.localBody()
			c.local(w, r)
			if !c.again {
				return
			}
		} else if r.Header.Get(headerForwarded) != "" {
			// The peer that forwarded it waits and retries itself.
			writeError(w, wire.CodeNoLeader, "leadership changed while forwarding; nothing was done, retry")
			return
		} else if target, ok := s.leaderURL(); ok {
			if !s.forwardOnce(w, r, c, target) {
				return
			}
		} else {
			addressWanted = true
		}
		if !s.awaitLeaderChange(ctx, c.until, addressWanted) {
			msg := fmt.Sprintf("no leader this node can reach (waited %s); nothing was done, retry", s.cfg.LeaderWait)
			if s.isDraining() {
				msg = "this node is shutting down; nothing was done, retry on another node"
			}
			writeError(w, wire.CodeNoLeader, msg)
			return
		}
	}
}

// forwardOnce sends c to the leader at target; it reports whether nothing
// was done and nothing written, so the request may be tried again.
func (s *Server) forwardOnce(w http.ResponseWriter, r *http.Request, c *leaderCall, target *url.URL) bool {
	cut, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if longPoll(r) {
		// A stopping node does not wait for its forwarded long-polls.
		go func() {
			select {
			case <-s.draining:
				cancel(errDraining)
			case <-cut.Done():
			}
		}()
	}
	try := &forwardTry{until: c.until}
	out := r.WithContext(context.WithValue(context.WithValue(cut, keyTarget, target), keyTry, try))
	out.Body, out.ContentLength, out.TransferEncoding = c.reader(), c.length(), nil
	// Lets the transport resend on a fresh connection when a pooled one
	// turns out dead before anything was written.
	out.GetBody = func() (io.ReadCloser, error) { return c.reader(), nil }
	s.proxy.ServeHTTP(w, out)
	return try.retry
}

// longPoll reports whether r is a claim that may wait for a job.
func longPoll(r *http.Request) bool {
	return r.Pattern == "POST /jobs/claim" || r.Pattern == "GET /jobs/next"
}

// awaitLeaderChange waits until the leader changes, or (with
// addressWanted) an entry is applied, which may hold the leader's HTTP
// address, or a moment passes; false once until is past or ctx ends.
func (s *Server) awaitLeaderChange(ctx context.Context, until time.Time, addressWanted bool) bool {
	changed := s.node.LeaderChanged()
	var applied <-chan struct{} // nil: never
	if addressWanted {
		applied = s.state.Changed()
	}
	left := time.Until(until)
	if left <= 0 {
		return false
	}
	t := time.NewTimer(min(left, leaderPoll))
	defer t.Stop()
	select {
	case <-changed:
	case <-applied: // the leader's address may have arrived
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return time.Now().Before(until) || s.node.IsLeader()
}

// leaderPoll is the longest serveLeader waits before it looks again for a
// leader: the leader it could not reach may be back.
const leaderPoll = 100 * time.Millisecond

// withRequestID gives every request an id (kept if the client sent one),
// echoes it in the reply, and logs the request.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(headerRequestID)
		if id == "" || len(id) > 128 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(headerRequestID, id)
		ctx := context.WithValue(r.Context(), keyRequestID, id)
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" && s.cfg.Auth != nil {
			// withAuth hands the mux a copy of r, which got the pattern.
			_, route = s.mux.Handler(r)
		}
		if route == "" {
			route = "unmatched"
		}
		s.metrics.observeRequest(route, sw.status, time.Since(start))
		// A 503 says "not now, try again" (no leader yet, an election, a
		// drain) and clients retry it: it is no warning, and every start
		// has some while the first leader is elected.
		level := slog.LevelDebug
		if sw.status >= http.StatusInternalServerError && sw.status != http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		if !s.logger.Enabled(ctx, level) {
			return // without building the line's arguments
		}
		s.logger.Log(ctx, level, "request", "method", r.Method, "path", r.URL.Path, "route", route, "status", sw.status,
			"duration", time.Since(start), "request_id", id)
	})
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
