// Package api serves Workron's HTTP/JSON API on every node: it validates
// requests, forwards writes from followers to the leader, serves reads
// from the node's own state once it has applied the leader's read index
// (reads.go), turns requests into commands for the leader's proposer, parks
// long-polling workers until a job is ready. It never writes the state
// itself: every change goes through Raft. The leader-only loops live in
// leader, which the API feeds through Recorder and Liveness
// (leader.go); node puts the two together.
package api

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/ui"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/dispatch"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/liveness"
	"github.com/workron/workron/raftnode"
)

// Raft is what the API needs of the local cluster member.
type Raft interface {
	Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error)
	ProposeAll(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, []error)
	ProposeTogether(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, error)
	IsLeader() bool
	Leader() (id, addr string)
	LeaderChanged() <-chan struct{}
	VerifyLeader(ctx context.Context) error
	CommitIndex() uint64
	ID() string
	RaftAddr() string
	Role() string
	Servers() ([]raftnode.Server, error)
	AddNonvoter(ctx context.Context, id, addr string) error
	RemoveServer(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context) error
	Removed() bool
	Stats() raftnode.Stats
	AppliedIndex() uint64
	WriteBackup(w io.Writer) (int64, error)
	ClusterProtocol() int
	AwaitProtocol(ctx context.Context) int
	SetMemberProtocols(m map[string]int)
	NewRestoreFile() (*os.File, error)
	RestoreFile(ctx context.Context, path string) (raftnode.RestoreInfo, error)
	DiskUsage() raftnode.DiskUsage
}

// Config configures a Server.
type Config struct {
	// Node is the local cluster member. Required.
	Node Raft
	// State is the local state machine, read for GETs. Required.
	State *fsm.FSM
	// AdvertiseHTTP is the base URL peers and forwarded requests reach this
	// node at, e.g. "http://127.0.0.1:7001". Required.
	AdvertiseHTTP string
	// JoinURLs are nodes to ask to add this one to their cluster.
	JoinURLs []string

	// LeaseTTL is how long a claimed job's lease lasts without a
	// heartbeat. Defaults to 30s.
	LeaseTTL time.Duration
	// MaxWait caps a claim's long-poll. Defaults to 60s.
	MaxWait time.Duration
	// Liveness is which workers this node counts as alive; the API marks
	// in it the long-polls and heartbeats it hears. node shares one with
	// the leader loops. Defaults to a Tracker whose OfflineAfter is 3
	// lease TTLs.
	Liveness *liveness.Tracker
	// MaxBodyBytes caps a request body (413 beyond). Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxBatchBodyBytes caps a batch submit's body. Defaults to 32 MiB.
	MaxBatchBodyBytes int64
	// MaxBodyBytesInFlight caps the bytes of request bodies this node holds
	// at once (read, decoded, served or forwarded to the leader), taken by
	// Content-Length before a body is read, or as a chunked one is read;
	// a request beyond it gets 503 busy with Retry-After, its body unread.
	// At least the largest body a route takes (MaxBodyBytes,
	// MaxBatchBodyBytes, fsm.MaxCheckpointBytes); a restore, which streams
	// to disk, takes only its 64 KiB buffer. Defaults to 256 MiB.
	MaxBodyBytesInFlight int64
	// MaxRestoreBytes caps the backup POST /restore takes, which streams
	// to a file in the data directory, never into memory. Defaults to
	// 16 GiB.
	MaxRestoreBytes int64
	// MaxBatchJobs caps the jobs of one batch submit. Defaults to 1000.
	MaxBatchJobs int
	// Retention is how long finished jobs are kept when they give no
	// retention of their own; 0 keeps them forever. Failed and cancelled
	// jobs are kept at least the leader's sweeper's KeepFailed (a week by
	// default). Defaults to 24h, as River keeps completed jobs.
	Retention time.Duration

	// DiskLowFree is how little free space on the data directory's disk
	// counts as low (disk.go). Defaults to DefaultDiskThreshold; the zero
	// value never warns.
	DiskLowFree DiskThreshold
	// DiskCheckInterval is how often WatchDisk looks. Defaults to 10s.
	DiskCheckInterval time.Duration

	// LeaderWait is how long a request that needs the leader waits for one
	// when this node knows none, cannot reach it, or just lost its own
	// leadership, before it is answered 503: an election then costs the
	// client a delay, not an error. A request's own deadline still ends the
	// wait. Defaults to 5s.
	LeaderWait time.Duration

	// Logger receives request and job logs. Defaults to discarding them.
	Logger *slog.Logger
	// Registry receives the API's metrics. Defaults to a new registry.
	Registry *prometheus.Registry
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time

	// Auth, when set, requires a bearer token with the right role on every
	// route but GET /health, the dashboard's files and (with MetricsOpen)
	// GET /metrics; see auth.go. Nil serves everyone.
	Auth *Tokens
	// MetricsOpen serves GET /metrics without a token even when Auth is set.
	MetricsOpen bool
	// ClientTLS, when set, is the TLS configuration of the requests this node
	// sends to its peers (forwarding, joining, health probes): the cluster's
	// CA and this node's certificate.
	ClientTLS *tls.Config
	// JoinNeedsMemberCert refuses POST /cluster/join (403) unless it came
	// over TLS with a client certificate verified against the cluster's CA
	// (the HTTPS server's ClientCAs), which nodes joining with --join
	// present. Set it with mutual TLS.
	JoinNeedsMemberCert bool
	// MaxLongPolls caps the claims that long-poll on this node at once. A
	// claim beyond it does not wait: it takes a ready job if there is one,
	// else gets 429 with Retry-After. It caps the workers' actions
	// long-polls (POST /workers/{id}/actions) apart, as many again.
	// Defaults to 1024.
	MaxLongPolls int
	// MaxWorkersPerToken caps the worker ids active at once for one token
	// (for all workers together on a cluster without tokens): a register
	// or claim as one more is refused with 429 too_many_workers. Active
	// means registered or claimed as, and not declared offline or
	// forgotten since. The cap is carried by the command (fsm.Register,
	// fsm.Claim MaxWorkers) once the cluster runs fsm.ProtocolWorkerCap.
	// Defaults to 1000.
	MaxWorkersPerToken int
	// Tracer, when set, receives the node's spans: one per request and, in
	// each job's trace, one per attempt's claim and end (trace.go). Nil
	// records none; jobs still keep and hand on their callers' traces.
	Tracer trace.TracerProvider
	// CheckHost refuses (403 host_not_allowed) a request whose Host header
	// names this node by a name it does not know: a web page whose own
	// domain resolves to this node (DNS rebinding) is then not served.
	// Known are IP literals, localhost and names under .localhost,
	// AdvertiseHTTP's host, and AllowedHosts. node sets it for a node that
	// listens on loopback only, and whenever AllowedHosts is given.
	CheckHost bool
	// AllowedHosts are the host names (without port) CheckHost serves
	// besides those; "*" serves every Host.
	AllowedHosts []string
	// ListScan caps the jobs one page of GET /jobs examines; a page that
	// reaches it ends early, marked partial. Defaults to MaxListScan.
	ListScan int
	// CountScan caps the jobs one GET /jobs/count examines; a count that
	// reaches it is not exact and gives a cursor to go on from. Defaults
	// to MaxCountScan.
	CountScan int
	// SeriesScan caps the jobs one GET /stats/series examines; a reply
	// that reaches it is marked partial. Defaults to MaxSeriesScan.
	SeriesScan int

	// Pprof serves the Go runtime's profiles (net/http/pprof) under
	// /debug/pprof/, admin-only with Auth. Defaults to false: the routes are
	// not registered and answer 404.
	Pprof bool
}

// DefaultConfig returns a Config with every optional field at its default.
func DefaultConfig() Config {
	return Config{
		LeaseTTL:             30 * time.Second,
		MaxWait:              60 * time.Second,
		MaxBodyBytes:         1 << 20,
		MaxBatchBodyBytes:    32 << 20,
		MaxRestoreBytes:      16 << 30,
		MaxBodyBytesInFlight: 256 << 20,
		MaxBatchJobs:         1000,
		MaxLongPolls:         1024,
		MaxWorkersPerToken:   1000,
		Retention:            24 * time.Hour,
		LeaderWait:           5 * time.Second,
		ListScan:             MaxListScan,
		CountScan:            MaxCountScan,
		DiskLowFree:          DefaultDiskThreshold,
		DiskCheckInterval:    10 * time.Second,
	}
}

// Validate names the first missing or out-of-bounds field.
func (c *Config) Validate() error {
	switch {
	case c.Node == nil:
		return errors.New("api: Node is required")
	case c.State == nil:
		return errors.New("api: State is required")
	case c.AdvertiseHTTP == "":
		return errors.New("api: AdvertiseHTTP is required")
	case c.LeaseTTL < 10*time.Millisecond:
		return fmt.Errorf("api: LeaseTTL must be at least 10ms, got %s", c.LeaseTTL)
	case c.MaxWait < 0:
		return fmt.Errorf("api: MaxWait must not be negative")
	case c.MaxBodyBytes < 1024:
		return fmt.Errorf("api: MaxBodyBytes must be at least 1024, got %d", c.MaxBodyBytes)
	case c.MaxBodyBytesInFlight < max(c.MaxBodyBytes, c.MaxBatchBodyBytes, fsm.MaxCheckpointBytes):
		return fmt.Errorf("api: MaxBodyBytesInFlight must be at least the largest body a route takes (%d bytes), got %d",
			max(c.MaxBodyBytes, c.MaxBatchBodyBytes, fsm.MaxCheckpointBytes), c.MaxBodyBytesInFlight)
	case c.MaxRestoreBytes < 0:
		return fmt.Errorf("api: MaxRestoreBytes must not be negative, got %d", c.MaxRestoreBytes)
	case c.MaxBatchJobs < 1:
		return fmt.Errorf("api: MaxBatchJobs must be at least 1")
	case c.MaxLongPolls < 0:
		return fmt.Errorf("api: MaxLongPolls must not be negative, got %d", c.MaxLongPolls)
	case c.MaxWorkersPerToken < 0:
		return fmt.Errorf("api: MaxWorkersPerToken must not be negative, got %d", c.MaxWorkersPerToken)
	case c.Retention < 0:
		return fmt.Errorf("api: Retention must not be negative")
	case c.ListScan < 0 || c.CountScan < 0 || c.SeriesScan < 0:
		return fmt.Errorf("api: ListScan, CountScan and SeriesScan must not be negative, got %d, %d and %d", c.ListScan, c.CountScan, c.SeriesScan)
	case c.DiskLowFree.Percent < 0 || c.DiskLowFree.Percent > 100:
		return fmt.Errorf("api: DiskLowFree.Percent must be from 0 to 100, got %g", c.DiskLowFree.Percent)
	case c.LeaderWait < 0 || c.LeaderWait > time.Minute:
		return fmt.Errorf("api: LeaderWait must be between 0 and 1m, got %s", c.LeaderWait)
	}
	return nil
}

// Server is the HTTP API of one node.
type Server struct {
	cfg   Config
	node  Raft
	state *fsm.FSM
	// silentEmpty is when releaseSilentWorker last found no silent id of
	// an owner (fence.go).
	silentMu    sync.Mutex
	silentEmpty map[string]time.Time
	logger      *slog.Logger
	mux         *http.ServeMux
	proxy       *httputil.ReverseProxy
	client      *http.Client
	metrics     *metrics
	tracer      trace.Tracer    // nil: no spans
	hosts       map[string]bool // the names CheckHost serves; nil: every Host

	// budget bounds the request body bytes this node holds (inflight.go).
	budget bodyBudget
	// restoring is held by the one restore this node receives at a time
	// (backup.go); diskFree tells the room left for it (tests replace it).
	restoring atomic.Bool
	diskFree  func(dir string) (uint64, bool)
	// diskSpace tells the free space and size of a disk (disk.go; tests
	// replace it); diskLow is whether the last check found it low.
	diskSpace func(dir string) (free, size uint64, ok bool)
	diskLow   atomic.Bool

	// polls holds a token per claim long-polling on this node.
	polls chan struct{}
	// watches holds a token per worker's actions long-poll on this node
	// (actions.go), as many as polls.
	watches chan struct{}

	// live is which workers this node counts as alive; the API marks the
	// long-polls and heartbeats it hears (Config.Liveness).
	live *liveness.Tracker

	// claiming limits concurrent long-poll claims to the jobs ready.
	claiming dispatch.Gate
	// waiters are the long-polls parked for a submit to hand them a job
	// (handoff.go).
	waiters dispatch.Waiters

	// draining is closed by Drain: long-polls end, forwarded ones are cut.
	draining  chan struct{}
	drainOnce sync.Once
}

// New builds a Server; call Handler to serve it.
func New(cfg Config) (*Server, error) {
	if cfg.MaxBatchBodyBytes == 0 {
		cfg.MaxBatchBodyBytes = 32 << 20
	}
	def := DefaultConfig()
	cfg.MaxLongPolls = cmp.Or(cfg.MaxLongPolls, def.MaxLongPolls)
	cfg.MaxRestoreBytes = cmp.Or(cfg.MaxRestoreBytes, def.MaxRestoreBytes)
	cfg.MaxWorkersPerToken = cmp.Or(cfg.MaxWorkersPerToken, def.MaxWorkersPerToken)
	cfg.MaxBodyBytesInFlight = cmp.Or(cfg.MaxBodyBytesInFlight, def.MaxBodyBytesInFlight)
	cfg.DiskCheckInterval = cmp.Or(cfg.DiskCheckInterval, def.DiskCheckInterval)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Liveness == nil {
		live, err := liveness.New(liveness.Config{OfflineAfter: 3 * cfg.LeaseTTL})
		if err != nil {
			return nil, fmt.Errorf("api: worker liveness: %w", err)
		}
		cfg.Liveness = live
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.AdvertiseHTTP = strings.TrimRight(cfg.AdvertiseHTTP, "/")
	s := &Server{
		cfg:      cfg,
		node:     cfg.Node,
		state:    cfg.State,
		live:     cfg.Liveness,
		logger:   cfg.Logger.With("component", "api"),
		mux:      http.NewServeMux(),
		client:   &http.Client{Transport: newTransport(), Timeout: 10 * time.Second},
		polls:    make(chan struct{}, cfg.MaxLongPolls),
		watches:  make(chan struct{}, cfg.MaxLongPolls),
		draining: make(chan struct{}),
		diskFree: diskFree,
	}
	s.budget.max = cfg.MaxBodyBytesInFlight
	s.diskSpace = diskSpace
	if cfg.Tracer != nil {
		s.tracer = cfg.Tracer.Tracer(tracerName)
	}
	s.hosts = newHostCheck(cfg)
	s.proxy = s.newProxy()
	s.setClientTLS()
	s.metrics = newMetrics(cfg.Registry, s)
	s.routes()
	return s, nil
}

// Handler is the node's whole HTTP surface.
func (s *Server) Handler() http.Handler {
	return s.withTrace(s.withRequestID(s.withBrowserGuard(s.withAuth(s.refuseIfRemoved(s.traceRoute(s.mux))))))
}

func (s *Server) routes() {
	w := s.leaderWrite
	r := s.readRoute
	big := func(h http.HandlerFunc) http.HandlerFunc { return s.leaderRoute(s.cfg.MaxBatchBodyBytes, true, h) }
	// Membership changes are not proposals alone: never replayed.
	member := func(h http.HandlerFunc) http.HandlerFunc { return s.leaderRoute(s.cfg.MaxBodyBytes, false, h) }
	s.mux.HandleFunc("POST /jobs", w(s.handleSubmit))
	s.mux.HandleFunc("POST /jobs/batch", big(s.handleBatchSubmit))
	s.mux.HandleFunc("GET /jobs", r(s.handleList))
	s.mux.HandleFunc("GET /jobs/count", r(s.handleCount))
	s.mux.HandleFunc("GET /stats/series", r(s.handleSeries))
	s.mux.HandleFunc("GET /jobs/next", w(s.handleNext))
	s.mux.HandleFunc("POST /jobs/claim", w(s.handleClaim))
	s.mux.HandleFunc("POST /jobs/reports", big(s.handleBatchReport))
	s.mux.HandleFunc("GET /jobs/{id}", r(s.handleGet))
	s.mux.HandleFunc("GET /jobs/{id}/parent_results", r(s.handleParentResults))
	s.mux.HandleFunc("POST /jobs/{id}/heartbeat", w(s.handleJobHeartbeat))
	s.mux.HandleFunc("POST /jobs/{id}/done", w(s.handleDone))
	s.mux.HandleFunc("POST /jobs/{id}/fail", w(s.handleFail))
	s.mux.HandleFunc("POST /jobs/{id}/cancel", w(s.handleCancel))
	s.mux.HandleFunc("POST /jobs/{id}/retry", w(s.handleRetry))
	s.mux.HandleFunc("POST /jobs/{id}/checkpoint", s.leaderRoute(max(s.cfg.MaxBodyBytes, fsm.MaxCheckpointBytes), true, s.handleCheckpoint))
	s.mux.HandleFunc("POST /jobs/{id}/preempted", w(s.handlePreempted))
	s.mux.HandleFunc("POST /bulk", w(s.handleBulkCreate))
	s.mux.HandleFunc("GET /bulk", r(s.handleBulkList))
	s.mux.HandleFunc("GET /bulk/{id}", r(s.handleBulkGet))
	s.mux.HandleFunc("POST /bulk/{id}/stop", w(s.handleBulkStop))
	s.mux.HandleFunc("PUT /jobs/{id}/steps/{key}", s.leaderRoute(max(s.cfg.MaxBodyBytes, maxStepBodyBytes), true, s.handlePutStep))
	s.mux.HandleFunc("GET /jobs/{id}/steps", r(s.handleListSteps))
	s.mux.HandleFunc("GET /jobs/{id}/steps/{key}", r(s.handleGetStep))
	s.mux.HandleFunc("POST /jobs/{id}/steps/{key}/sleep", w(s.handleSleepStep))
	s.mux.HandleFunc("POST /jobs/{id}/steps/{key}/wait", w(s.handleWaitStep))
	s.mux.HandleFunc("POST /jobs/{id}/steps/{key}/invoke", w(s.handleInvokeStep))
	s.mux.HandleFunc("POST /events", s.leaderRoute(max(s.cfg.MaxBodyBytes, maxEventBodyBytes), true, s.handleSendEvent))
	s.mux.HandleFunc("POST /jobs/{id}/signals/{name}", s.leaderRoute(max(s.cfg.MaxBodyBytes, maxEventBodyBytes), true, s.handleSignal))
	s.mux.HandleFunc("GET /gangs/{id}", r(s.handleGetGang))
	s.mux.HandleFunc("POST /workers/register", w(s.handleRegister))
	s.mux.HandleFunc("POST /workers/{id}/heartbeat", w(s.handleWorkerHeartbeat))
	s.mux.HandleFunc("POST /workers/{id}/actions", s.handleWorkerActions) // this node's state: never forwarded
	s.mux.HandleFunc("GET /workers", r(s.handleWorkers))
	s.mux.HandleFunc("DELETE /workers/{id}", w(s.handleDeleteWorker))
	s.mux.HandleFunc("GET /queues", r(s.handleQueues))
	s.mux.HandleFunc("GET /queues/{name}", r(s.handleGetQueue))
	s.mux.HandleFunc("PUT /queues/{name}", w(s.handleSetQueueLimits))
	s.mux.HandleFunc("POST /queues/{name}/pause", w(s.handlePause))
	s.mux.HandleFunc("POST /queues/{name}/resume", w(s.handleResume))
	s.mux.HandleFunc("DELETE /queues/{name}/pauses", w(s.handleLiftPauses))
	s.mux.HandleFunc("GET /pauses", r(s.handlePauses))
	s.mux.HandleFunc("POST /schedules", w(s.handleCreateSchedule))
	s.mux.HandleFunc("GET /schedules", r(s.handleListSchedules))
	s.mux.HandleFunc("GET /schedules/{name}", r(s.handleGetSchedule))
	s.mux.HandleFunc("PUT /schedules/{name}", w(s.handleUpdateSchedule))
	s.mux.HandleFunc("DELETE /schedules/{name}", w(s.handleDeleteSchedule))
	s.mux.HandleFunc("POST /schedules/{name}/pause", w(s.handlePauseSchedule))
	s.mux.HandleFunc("POST /schedules/{name}/resume", w(s.handleResumeSchedule))
	s.mux.HandleFunc("POST /schedules/{name}/trigger", w(s.handleTriggerSchedule))
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /cluster", s.handleCluster)
	s.mux.HandleFunc("GET /cluster/read_index", s.handleReadIndex)
	s.mux.HandleFunc("POST /cluster/join", member(s.handleJoin))
	s.mux.HandleFunc("DELETE /cluster/nodes/{id}", member(s.handleRemove))
	s.mux.HandleFunc("GET /backup", s.leaderRead(s.handleBackup))
	s.mux.HandleFunc("POST /restore", s.handleRestore) // streams its body to disk, then to the leader
	s.mux.HandleFunc("GET /debug/digest", s.handleDigest)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.mux.HandleFunc("GET /openapi.json", s.handleOpenAPI)
	if s.cfg.Pprof {
		s.pprofRoutes()
	}
	dashboard := ui.Handler()
	s.mux.Handle("GET /ui", dashboard)
	s.mux.Handle("GET /ui/", dashboard)
	s.mux.Handle("GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, wire.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
}
