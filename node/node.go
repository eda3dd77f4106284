// Package node assembles one Workron node from one Config: the Raft member
// (raftnode), the HTTP API (api) behind a net/http server with its limits
// and TLS, the leader loops (leader) that Raft starts and stops
// with leadership, the worker liveness (liveness) both of them read, and
// the API's background work (announcing this node, watching the members'
// protocols). Start brings them up in that order and
// Shutdown takes them down HTTP first, Raft last. The binary, the test
// clusters and the bench start nodes only through it. It holds no rule of
// its own: it wires, and it keeps the order.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api"
	"github.com/workron/workron/internal/connlimit"
	"github.com/workron/workron/internal/telemetry"
	"github.com/workron/workron/leader"
	"github.com/workron/workron/liveness"
	"github.com/workron/workron/raftnode"
)

// Config configures one node.
type Config struct {
	// Raft configures the Raft member: ID, RaftAddr and DataDir are
	// required. Start sets OnLeader (to the leader loops), TLS (from TLS
	// below, when given) and Logger (when nil).
	Raft raftnode.Config
	// API configures the HTTP API. Start sets Node and State; it sets
	// AdvertiseHTTP, when empty, to the listener's address; ClientTLS and
	// JoinNeedsMemberCert from TLS, when given; CheckHost when the
	// listener is on loopback or AllowedHosts names hosts; Now, when nil,
	// to the Raft node's cluster time; Logger, when nil; Liveness, to the
	// tracker built from Liveness below.
	API api.Config
	// Leader gives the timings of the leader loops. Start fills their
	// dependencies, takes the lease TTL (Reaper.LeaseTTL) and the clock
	// from API, and the worker timeout (Admission.WorkerOfflineAfter) from
	// Liveness.
	Leader leader.Config
	// Liveness configures which workers the node counts as alive, one
	// tracker shared by the API and the leader loops. OfflineAfter
	// defaults to 3 API.LeaseTTLs.
	Liveness liveness.Config

	// HTTPAddr is the host:port the API listens on; port 0 picks one (see
	// Node.Addr). Required unless Listener is set.
	HTTPAddr string
	// Listener, when set, is the plain TCP listener the API serves on,
	// instead of one on HTTPAddr; Start owns it from then on (Shutdown or
	// a failed Start closes it).
	Listener net.Listener
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server's. Defaults to 10s, 60s, API.MaxWait+30s (also when 0)
	// and 120s.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's header block (431 beyond). Defaults
	// to 64 KiB; 0 is net/http's default (1 MiB).
	MaxHeaderBytes int
	// MaxConnections caps the HTTP connections open at once, before any
	// authentication (internal/connlimit): at the cap a new connection
	// closes the oldest one that carries no request (silent since it was
	// opened, or idle between requests), or waits for a request to end.
	// Defaults to 4096; 0 means no cap.
	MaxConnections int
	// TLS, when set, serves HTTPS with its certificate, sends this node's
	// requests to its peers with its client configuration, and with a CA
	// refuses joins without a member certificate and secures the Raft
	// transport. Nil serves plain HTTP.
	TLS *api.TLSFiles
	// ShutdownTimeout is how long Shutdown lets requests in flight finish
	// before it cancels them. Defaults to 10s.
	ShutdownTimeout time.Duration
	// Logger receives every component's logs unless its own config names
	// another. Defaults to discarding them.
	Logger *slog.Logger
	// Tracing configures the node's spans (internal/telemetry): exported
	// over OTLP when it names an endpoint (or the OTEL_* variables do),
	// else none. Start sets its InstanceID to the Raft ID when empty.
	Tracing telemetry.Config
}

// DefaultMaxConnections is Config.MaxConnections' default: room for the
// 1,024 long-polls api.DefaultConfig allows with a few connections per
// worker and client, far below the file descriptors a process gets.
const DefaultMaxConnections = 4096

// DefaultConfig returns a Config with every optional field at its default.
func DefaultConfig() Config {
	return Config{
		Raft:              raftnode.DefaultConfig(),
		API:               api.DefaultConfig(),
		Leader:            leader.DefaultConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		MaxConnections:    DefaultMaxConnections,
		ShutdownTimeout:   10 * time.Second,
	}
}

// Validate names the first missing or out-of-bounds field of the node's
// own; Start checks each component's config when it builds it.
func (c *Config) Validate() error {
	switch {
	case c.HTTPAddr == "" && c.Listener == nil:
		return errors.New("node: HTTPAddr or Listener is required")
	case c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0:
		return errors.New("node: the HTTP timeouts must not be negative")
	case c.MaxHeaderBytes < 0:
		return fmt.Errorf("node: MaxHeaderBytes must not be negative, got %d", c.MaxHeaderBytes)
	case c.MaxConnections < 0:
		return fmt.Errorf("node: MaxConnections must not be negative, got %d", c.MaxConnections)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("node: ShutdownTimeout must not be negative, got %s", c.ShutdownTimeout)
	}
	if err := c.Tracing.Validate(); err != nil {
		return fmt.Errorf("node: Tracing: %w", err)
	}
	return nil
}

// Node is a started node. Its methods are safe for concurrent use.
type Node struct {
	raft   *raftnode.Node
	api    *api.Server
	traces *telemetry.Provider
	http   *http.Server
	addr   string // the HTTP listener's host:port
	url    string // API.AdvertiseHTTP
	wait   time.Duration
	cancel context.CancelFunc // cancels the requests' and background work's context
	served chan error
	bg     sync.WaitGroup // Announce, WatchProtocols

	once sync.Once
	err  error
}

// Start opens the Raft node, builds the API and the leader loops, and
// serves HTTP; it returns once the node listens. On error nothing is left
// running.
func Start(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
	}
	n, err := start(cfg, ln)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return n, nil
}

func start(cfg Config, ln net.Listener) (*Node, error) {
	n := &Node{addr: ln.Addr().String(), wait: cfg.ShutdownTimeout, served: make(chan error, 1)}
	rc, ac := cfg.Raft, cfg.API
	if rc.Logger == nil {
		rc.Logger = cfg.Logger
	}
	if ac.Logger == nil {
		ac.Logger = cfg.Logger
	}
	// A page whose domain resolves to a loopback node (DNS rebinding) must
	// not be served: such a node knows the names it answers to.
	ac.CheckHost = ac.CheckHost || len(ac.AllowedHosts) > 0 || loopbackAddr(ln.Addr())
	var limit *connlimit.Listener
	if cfg.MaxConnections > 0 {
		limit = connlimit.New(ln, cfg.MaxConnections)
		ln = limit
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
		rc.TLS = cfg.TLS.Raft()
		ac.ClientTLS, ac.JoinNeedsMemberCert = cfg.TLS.Client(), cfg.TLS.Mutual()
		ln = tls.NewListener(ln, cfg.TLS.Server())
	}
	if ac.AdvertiseHTTP == "" {
		ac.AdvertiseHTTP = scheme + "://" + n.addr
	}
	// Raft calls OnLeader once the node leads, which may be before the
	// loops exist: it waits for them (or for the term to end).
	loops := make(chan *leader.Leadership, 1)
	rc.OnLeader = func(ctx context.Context) {
		select {
		case l := <-loops:
			loops <- l
			l.Run(ctx)
		case <-ctx.Done():
		}
	}
	tc := cfg.Tracing
	if tc.InstanceID == "" {
		tc.InstanceID = rc.ID
	}
	var err error
	if n.traces, err = telemetry.New(context.Background(), tc); err != nil {
		return nil, err
	}
	if n.traces.Recording() {
		ac.Tracer = n.traces
	}
	if n.raft, err = raftnode.Open(rc); err != nil {
		return nil, errors.Join(err, n.traces.Shutdown(context.Background()))
	}
	ac.Node, ac.State = n.raft, n.raft.FSM()
	lv := cfg.Liveness
	if lv.OfflineAfter == 0 {
		lv.OfflineAfter = 3 * ac.LeaseTTL
	}
	if ac.Liveness, err = liveness.New(lv); err != nil {
		return nil, errors.Join(fmt.Errorf("worker liveness: %w", err), n.raft.Shutdown(), n.traces.Shutdown(context.Background()))
	}
	if ac.Now == nil {
		ac.Now = n.raft.Now // the cluster time: never behind the log's
	}
	if n.api, err = api.New(ac); err != nil {
		return nil, errors.Join(err, n.raft.Shutdown(), n.traces.Shutdown(context.Background()))
	}
	l, err := newLeadership(cfg, ac, n)
	if err != nil {
		return nil, errors.Join(err, n.raft.Shutdown(), n.traces.Shutdown(context.Background()))
	}
	loops <- l
	n.url = ac.AdvertiseHTTP
	base, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	write := cfg.WriteTimeout
	if write == 0 {
		write = ac.MaxWait + 30*time.Second
	}
	n.http = &http.Server{
		Handler:           n.api.Handler(),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      write,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	if limit != nil {
		n.http.ConnState = limit.ConnState
	}
	go func() { n.served <- n.http.Serve(ln) }()
	n.bg.Go(func() { n.api.Announce(base) })
	n.bg.Go(func() { n.api.WatchProtocols(base) })
	n.bg.Go(func() { n.api.WatchDisk(base) })
	return n, nil
}

// loopbackAddr reports whether a listener's address is a loopback one.
func loopbackAddr(a net.Addr) bool {
	host, _, err := net.SplitHostPort(a.String())
	return err == nil && api.IsLoopbackHost(host)
}

// newLeadership builds the leader loops over the node's Raft and API.
func newLeadership(cfg Config, ac api.Config, n *Node) (*leader.Leadership, error) {
	lc := cfg.Leader
	lc.Reaper.LeaseTTL = ac.LeaseTTL
	lc.Admission.WorkerOfflineAfter = ac.Liveness.OfflineAfter()
	lc.Proposer, lc.State = n.raft, n.raft.FSM()
	lc.Recorder, lc.Liveness, lc.Establish = n.api, ac.Liveness, n.api.RecordAddress
	lc.Members, lc.Progress = n.raft, n.api
	lc.Now = ac.Now
	lc.Bulker.Compile = api.CompileSelector
	if lc.Logger == nil {
		lc.Logger = ac.Logger
	}
	return leader.New(lc)
}

// Shutdown stops the node the one way a node stops: HTTP first (long-polls
// end at once; other requests in flight finish or, after ShutdownTimeout,
// answer 503 or 504; see api.Server.Shutdown), then the API's background
// work, then Raft (a leader hands leadership to a peer first, which stops
// its leader loops), then the spans still buffered are sent (for at most
// telemetry.ShutdownTimeout). Safe to call twice; later calls return the
// first call's error.
func (n *Node) Shutdown() error {
	n.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), n.wait)
		defer cancel()
		err := n.api.Shutdown(ctx, n.http, n.cancel)
		if serr := <-n.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		n.bg.Wait()
		err = errors.Join(err, n.raft.Shutdown())
		tctx, tcancel := context.WithTimeout(context.Background(), telemetry.ShutdownTimeout)
		defer tcancel()
		n.err = errors.Join(err, n.traces.Shutdown(tctx))
	})
	return n.err
}

// Raft is the node's Raft member.
func (n *Node) Raft() *raftnode.Node { return n.raft }

// API is the node's HTTP API.
func (n *Node) API() *api.Server { return n.api }

// Tracer is the node's tracer provider (Config.Tracing): one that exports
// spans, or nil when the node records none. A worker in the same process
// (workron dev) shares it.
func (n *Node) Tracer() trace.TracerProvider {
	if !n.traces.Recording() {
		return nil
	}
	return n.traces
}

// URL is the base URL the node advertises, e.g. "http://127.0.0.1:7001".
func (n *Node) URL() string { return n.url }

// Addr is the host:port the HTTP API listens on (port 0 resolved).
func (n *Node) Addr() string { return n.addr }
