package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/internal/gctune"
	"github.com/workron/workron/internal/memlimit"
	"github.com/workron/workron/internal/telemetry"
	"github.com/workron/workron/leader"
	wnode "github.com/workron/workron/node" // "node" is a type of the e2e tests
	"github.com/workron/workron/raftnode"
)

// serverFlags are everything `workron server` takes.
type serverFlags struct {
	id, httpAddr, raftAddr, dataDir string
	advertiseHTTP                   string
	bootstrap                       bool
	peers, join                     string
	leaseTTL, maxWait, reapInterval time.Duration
	retention, sweepInterval        time.Duration
	retentionFailed                 time.Duration
	scheduleGrace                   time.Duration
	leaderWait                      time.Duration
	scheduleMaxCatchup              int
	heartbeat, election             time.Duration
	stateFsync                      bool
	stateCheck                      string
	snapshotThreshold, trailingLogs uint64
	snapshotLogRatio                float64
	snapshotInterval                time.Duration
	maxBatch, maxInflight           int
	gcMinGrowthMB                   int
	memoryLimit                     string
	diskLowFree                     string
	snapshotWriteRateMB             int
	raftLogLevel                    string
	pprof                           bool
	otlpEndpoint                    string
	fsyncDelay, clockOffset         time.Duration // test hooks
	logs                            logFlags
	sec                             securityFlags
	gang                            gangFlags
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.id, "id", "", "this node's unique id (required)")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:7001", "host:port the HTTP API listens on")
	fs.StringVar(&f.raftAddr, "raft", "127.0.0.1:8001", "host:port the Raft transport listens on and advertises")
	fs.StringVar(&f.dataDir, "data", "", "data directory (default ./data/ID)")
	fs.StringVar(&f.advertiseHTTP, "advertise-http", "", "base URL peers reach this node's API at (default http://HTTP-ADDR)")
	fs.BoolVar(&f.bootstrap, "bootstrap", false, "form a new one-node cluster if the data directory is new")
	fs.StringVar(&f.peers, "peers", "", "form a new cluster of these voters if the data directory is new: id=host:port,...")
	fs.StringVar(&f.join, "join", "", "ask this node (or comma-separated nodes) to add this one: http://host:port")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 30*time.Second, "how long a claimed job's lease lasts without a heartbeat")
	fs.DurationVar(&f.maxWait, "max-wait", 60*time.Second, "longest long-poll a claim may ask for")
	fs.DurationVar(&f.reapInterval, "reap-interval", time.Second, "how often the leader looks for expired leases")
	fs.DurationVar(&f.retention, "retention", api.DefaultConfig().Retention, "how long finished jobs are kept unless they say otherwise (0 = forever); failed and cancelled ones at least --retention-failed")
	fs.DurationVar(&f.retentionFailed, "retention-failed", leader.DefaultKeepFailed, "the least time failed and cancelled jobs are kept, however short their retention (0 = their retention); set it alike on every node, the leader's holds")
	fs.DurationVar(&f.sweepInterval, "sweep-interval", time.Minute, "how often the leader deletes finished jobs past their retention and prunes idle key buckets")
	fs.DurationVar(&f.scheduleGrace, "schedule-grace", leader.DefaultSchedulerConfig().Grace, "how late a schedule's tick may run and still count as on time; later ticks follow the schedule's catchup")
	fs.IntVar(&f.scheduleMaxCatchup, "schedule-max-catchup", leader.DefaultSchedulerConfig().MaxCatchup, "most missed ticks catchup \"all\" runs per schedule (the latest ones)")
	fs.DurationVar(&f.leaderWait, "leader-wait", api.DefaultConfig().LeaderWait, "how long a request that needs the leader waits for one (during an election, or while the leader is unreachable) before it gets 503")
	fs.DurationVar(&f.heartbeat, "raft-heartbeat-timeout", time.Second, "Raft heartbeat timeout")
	fs.DurationVar(&f.election, "raft-election-timeout", time.Second, "Raft election timeout")
	fs.BoolVar(&f.stateFsync, "state-fsync", false, "fsync the state file on every commit too (the Raft log is always fsync'd)")
	fs.StringVar(&f.stateCheck, "state-check", raftnode.StateCheckAuto, "when a start reads the whole state file to check its pages: auto (before serving only after a reboot with the file open, or if the last check did not pass or end; else in the background, stopping the node on damage) or start (always before serving)")
	fs.Uint64Var(&f.snapshotThreshold, "snapshot-threshold", raftnode.DefaultConfig().SnapshotThreshold, "log entries between snapshots (the least, with --snapshot-log-ratio)")
	fs.Float64Var(&f.snapshotLogRatio, "snapshot-log-ratio", raftnode.DefaultConfig().SnapshotLogRatio, "once the state file passes 64 MiB, snapshot only after log entries adding up to this share of it: a snapshot then writes at most 1/this bytes per log byte, however large the store; 0 keeps --snapshot-threshold fixed")
	fs.DurationVar(&f.snapshotInterval, "raft-snapshot-interval", raftnode.DefaultConfig().SnapshotInterval,
		"how often Raft checks --snapshot-threshold (at a random time between this and twice this)")
	fs.IntVar(&f.snapshotWriteRateMB, "snapshot-write-rate-mb", int(raftnode.DefaultConfig().SnapshotWriteRate>>20),
		"the most MiB a second this node writes a snapshot at, so that the copy of the state file leaves the disk and cores to the commits beside it; 0 writes it as fast as it can")
	fs.Uint64Var(&f.trailingLogs, "raft-trailing-logs", raftnode.DefaultConfig().TrailingLogs,
		"log entries a snapshot leaves in the log; a follower missing older ones is sent the whole snapshot")
	fs.IntVar(&f.maxBatch, "max-batch", raftnode.DefaultConfig().MaxBatch, "most commands the leader packs into one log entry")
	fs.IntVar(&f.maxInflight, "max-inflight", raftnode.DefaultConfig().MaxInflight, "most log entries the leader has in flight; while several callers propose, a small one goes out beside another only once one has finished, so commands pack")
	fs.IntVar(&f.gcMinGrowthMB, "gc-min-growth-mb", 128, "the least the Go heap grows, in MiB, between garbage collections (Go's own rule grows it by what is live: that applies above this); 0 keeps Go's rule; GOGC in the environment, when set, wins")
	fs.StringVar(&f.diskLowFree, "disk-low-free", api.DefaultDiskThreshold.String(), "warn (log, workron_disk_low, /health's disk.low) when the data directory's disk has less free space than this share of it or this size, whichever is more, e.g. 10%,1GiB; 0 never warns")
	fs.StringVar(&f.memoryLimit, "memory-limit", memlimit.Default, "the Go runtime's soft memory limit: a share of the memory the process may use (its cgroup's limit, else the machine's) like 80%, a size like 4GiB, or off; near it the collector runs more often rather than let the heap grow; GOMEMLIMIT in the environment, when set, wins")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go runtime profiles (net/http/pprof) at /debug/pprof/ on the HTTP API; admin token only with --auth-token-file (default off)")
	// Test hooks for the chaos harness (internal/tools/chaos); never needed in
	// production.
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", otlpUsage)
	fs.DurationVar(&f.fsyncDelay, "raft-fsync-delay", 0, "test hook: sleep this long before each Raft log write (a slow disk)")
	fs.DurationVar(&f.clockOffset, "clock-offset", 0, "test hook: add this to the node's clock (a clock that jumped)")
	fs.StringVar(&f.raftLogLevel, "raft-log-level", "warn", "hashicorp/raft's own log level: trace, debug, info (snapshots and log compaction), warn, error or off; its lines also pass --log-level")
	f.logs.register(fs)
	f.sec.register(fs)
	f.gang.register(fs)
}

// check refuses the values the configurations would take for "use the
// default" (zero) or that mean nothing (negative), naming the flag; the
// configurations check the rest.
func (f *serverFlags) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"schedule-grace", f.scheduleGrace},
		{"reserve-timeout", f.gang.reserveTimeout},
		{"drain-timeout", f.gang.drainTimeout},
		{"admission-interval", f.gang.admissionInterval},
		{"raft-snapshot-interval", f.snapshotInterval},
	} {
		if d.v <= 0 {
			return fmt.Errorf("--%s must be positive, got %s", d.name, d.v)
		}
	}
	if f.gang.offlineAfter < 0 {
		return fmt.Errorf("--worker-offline-after must not be negative (0 means 3 lease TTLs), got %s", f.gang.offlineAfter)
	}
	if f.gang.forgetAfter < 0 {
		return fmt.Errorf("--forget-workers-after must not be negative (0 never forgets), got %s", f.gang.forgetAfter)
	}
	for _, c := range []struct {
		name string
		v    uint64
	}{
		{"snapshot-threshold", f.snapshotThreshold},
		{"raft-trailing-logs", f.trailingLogs},
	} {
		if c.v == 0 {
			return fmt.Errorf("--%s must be at least 1, got 0", c.name)
		}
	}
	if f.snapshotWriteRateMB < 0 {
		return fmt.Errorf("--snapshot-write-rate-mb must not be negative (0 does not pace), got %d", f.snapshotWriteRateMB)
	}
	if f.gcMinGrowthMB < 0 {
		return fmt.Errorf("--gc-min-growth-mb must not be negative (0 keeps Go's rule), got %d", f.gcMinGrowthMB)
	}
	if _, err := memlimit.Parse(f.memoryLimit); err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	if _, err := api.ParseDiskThreshold(f.diskLowFree); err != nil {
		return fmt.Errorf("--disk-low-free: %w", err)
	}
	if f.scheduleMaxCatchup < 1 {
		return fmt.Errorf("--schedule-max-catchup must be at least 1, got %d", f.scheduleMaxCatchup)
	}
	return nil
}

func runServer(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serverFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.id == "" {
		return errors.New("server: --id is required")
	}
	if f.dataDir == "" {
		f.dataDir = "data/" + f.id
	}
	logger, err := f.logs.logger(stderr)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // from the start: SIGHUP's default would end the process
	defer signal.Stop(hup)
	srv, err := startServer(f, logger)
	if err != nil {
		return err
	}
	logger.Info("serving", "node", f.id, "http", srv.advertise, "raft", srv.node.RaftAddr(), "data", f.dataDir)
	for ctx.Err() == nil {
		select {
		case <-hup:
			srv.reloadSecurity(&f.sec)
		case <-ctx.Done():
		}
	}
	logger.Info("shutting down")
	return srv.shutdown()
}

// reloadSecurity swaps in the token file and the certificate as they are
// on disk now, and logs what it did or why it kept the old ones.
func (s *runningServer) reloadSecurity(f *securityFlags) {
	what, err := f.reload(s.sec)
	switch {
	case err != nil:
		s.logger.Error("SIGHUP: reload failed; the tokens and certificate in use are kept", "err", err)
	case len(what) == 0:
		s.logger.Info("SIGHUP: no token file or certificate to reload")
	default:
		s.logger.Info("SIGHUP: reloaded", "what", what)
	}
}

// runningServer is a started node (node) with what the verbs
// that start one read of it.
type runningServer struct {
	n         *wnode.Node
	node      *raftnode.Node
	advertise string
	logger    *slog.Logger
	sec       *security
}

// startServer starts a node from flags; it returns once the node listens.
func startServer(f serverFlags, logger *slog.Logger) (*runningServer, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	gctune.Start(uint64(f.gcMinGrowthMB) << 20)
	limit, _ := memlimit.Parse(f.memoryLimit) // checked above
	if bytes, from := memlimit.Apply(limit); bytes < math.MaxInt64 {
		logger.Info("memory limit", "mib", bytes>>20, "from", from)
	}
	nc, err := f.nodeConfig(logger)
	if err != nil {
		return nil, err
	}
	sec, err := f.sec.load()
	if err != nil {
		return nil, err
	}
	sec.configure(&f.sec, &nc)
	if nc.Listener, err = net.Listen("tcp", f.httpAddr); err != nil {
		return nil, fmt.Errorf("listen on --http %s: %w", f.httpAddr, err)
	}
	n, err := wnode.Start(nc)
	if err != nil {
		return nil, err
	}
	sec.warnExposure(logger, n.Addr(), f.raftAddr)
	return &runningServer{n: n, node: n.Raft(), advertise: n.URL(), logger: logger, sec: sec}, nil
}

// nodeConfig turns the flags into the node's configuration, less its
// security (security.configure) and listener.
func (f *serverFlags) nodeConfig(logger *slog.Logger) (wnode.Config, error) {
	peers, err := raftnode.ParsePeers(f.peers)
	if err != nil {
		return wnode.Config{}, err
	}
	if f.bootstrap && len(peers) > 0 {
		return wnode.Config{}, errors.New("server: give --bootstrap or --peers, not both")
	}
	nc := wnode.DefaultConfig()
	nc.Logger = logger
	rc := &nc.Raft
	rc.ID, rc.RaftAddr, rc.DataDir = f.id, f.raftAddr, f.dataDir
	rc.Bootstrap, rc.Peers = f.bootstrap, peers
	rc.HeartbeatTimeout, rc.ElectionTimeout = f.heartbeat, f.election
	rc.StateFsync = f.stateFsync
	rc.StateCheck = f.stateCheck
	rc.SnapshotWriteRate = int64(f.snapshotWriteRateMB) << 20
	rc.RaftLogLevel = f.raftLogLevel
	rc.SnapshotThreshold, rc.SnapshotInterval, rc.TrailingLogs = f.snapshotThreshold, f.snapshotInterval, f.trailingLogs
	rc.SnapshotLogRatio = f.snapshotLogRatio
	rc.MaxBatch, rc.MaxInflight = f.maxBatch, f.maxInflight
	rc.FsyncDelay = f.fsyncDelay
	if off := f.clockOffset; off != 0 {
		rc.Now = func() time.Time { return time.Now().Add(off) }
	}
	ac := &nc.API
	ac.AdvertiseHTTP = f.advertiseHTTP
	ac.JoinURLs = splitList(f.join)
	ac.LeaseTTL, ac.MaxWait = f.leaseTTL, f.maxWait
	ac.Retention = f.retention
	ac.DiskLowFree, _ = api.ParseDiskThreshold(f.diskLowFree) // checked in check
	ac.Pprof = f.pprof
	ac.LeaderWait = f.leaderWait
	lc := &nc.Leader
	lc.Reaper.Interval, lc.Sweeper.Interval = f.reapInterval, f.sweepInterval
	lc.Sweeper.KeepFailed = f.retentionFailed
	lc.Scheduler.Grace, lc.Scheduler.MaxCatchup = f.scheduleGrace, f.scheduleMaxCatchup
	nc.Tracing = telemetry.Config{Endpoint: f.otlpEndpoint, ServiceName: "workron"}
	if err := f.gang.configure(&nc); err != nil {
		return wnode.Config{}, err
	}
	return nc, nil
}

// shutdown stops the node (node.Node.Shutdown: HTTP first, then Raft) and
// says on stderr what went wrong.
func (s *runningServer) shutdown() error {
	if err := s.n.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "workron: shutdown:", err)
		return err
	}
	return nil
}
