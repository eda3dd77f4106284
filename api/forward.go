package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Headers the API sets or reads.
const (
	headerLeader    = "X-Workron-Leader"
	headerForwarded = "X-Workron-Forwarded"
	headerRequestID = "X-Request-ID"
)

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyTarget
	keyTokenName
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

// newProxy forwards a request to the leader whose URL is in its context.
// A dial failure means nothing reached the leader (503, retry); any later
// failure leaves the outcome unknown (502).
func (s *Server) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(keyTarget).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(headerForwarded, s.node.ID())
			pr.Out.Header.Set(headerRequestID, requestID(pr.In.Context()))
		},
		Transport:     newTransport(),
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(headerLeader, resp.Request.URL.Host)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				writeError(w, http.StatusServiceUnavailable, "no_leader", "the leader is unreachable; nothing was done, retry")
				return
			}
			if errors.Is(err, context.Canceled) {
				return
			}
			writeError(w, http.StatusBadGateway, "outcome_unknown", "lost the connection to the leader: "+err.Error())
		},
	}
}

// leaderURL is the leader's HTTP base URL, if this node knows it.
func (s *Server) leaderURL() (*url.URL, bool) {
	id, _ := s.node.Leader()
	if id == "" {
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

// forward sends the request on to the leader, or answers 503 when there is
// none this node can reach. A request that was already forwarded once is not
// forwarded again (leadership moved under it).
func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(headerForwarded) != "" {
		writeError(w, http.StatusServiceUnavailable, "no_leader", "leadership changed while forwarding; nothing was done, retry")
		return
	}
	target, ok := s.leaderURL()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "no_leader", "no leader is known to this node; nothing was done, retry")
		return
	}
	s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyTarget, target)))
}

// leaderWrite wraps a handler that proposes commands: it runs on the leader,
// and other nodes forward to it.
func (s *Server) leaderWrite(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.node.IsLeader() {
			s.forward(w, r)
			return
		}
		h(w, r)
	}
}

// leaderRead wraps a read: by default served by the leader after it checks
// with a quorum that it still leads; ?stale=1 serves this node's state.
func (s *Server) leaderRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if stale := r.URL.Query().Get("stale"); stale == "1" || stale == "true" {
			h(w, r)
			return
		}
		if !s.node.IsLeader() {
			s.forward(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := s.node.VerifyLeader(ctx); err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r)
	}
}

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
		if route == "" {
			route = "unmatched"
		}
		s.metrics.observeRequest(route, sw.status, time.Since(start))
		level := slog.LevelDebug
		if sw.status >= http.StatusInternalServerError {
			level = slog.LevelWarn
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
