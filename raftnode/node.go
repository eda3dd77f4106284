package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Errors returned by Node methods.
var (
	// ErrNotLeader means this node is not the leader; nothing was done.
	ErrNotLeader = errors.New("raftnode: not leader")
	// ErrNotCommitted means the command was not handed to Raft; nothing was done.
	ErrNotCommitted = errors.New("raftnode: not committed")
	// ErrUnknownOutcome means the command may or may not have been applied.
	ErrUnknownOutcome = errors.New("raftnode: outcome unknown")
	// ErrShutdown means the node is shutting down.
	ErrShutdown = errors.New("raftnode: shut down")
	// ErrNeedsUpgrade means the command needs a newer protocol than some
	// member of the cluster runs (see SetMemberProtocols); nothing was
	// done. The error is a *NeedsUpgradeError.
	ErrNeedsUpgrade = errors.New("raftnode: every node must be upgraded first")
	// ErrNotMember is returned by Promote for a node the configuration
	// does not hold.
	ErrNotMember = errors.New("raftnode: not a member")
)

// Node is one Raft member: its log, snapshots, state machine and proposer.
type Node struct {
	cfg    Config
	logger *slog.Logger

	raft     *raft.Raft
	fsm      *fsm.FSM
	state    *store.Store
	logStore *boltLogStore
	// The state file's background page check (restorecheck.go), under
	// checkMu: pageCheck is one to run once serving (openState, or a
	// restore at start) until Open starts the checks (checksLive); check
	// is the one running. beforeCheck, if set (tests), runs before a check
	// reads, given its stop channel.
	checkMu     sync.Mutex
	pageCheck   *store.PageCheck
	check       *bgCheck
	checksLive  bool
	beforeCheck func(stop <-chan struct{})
	onFatal     func(error) // Config.OnFatal or fatalExit
	snaps       *snapshotStore
	transport   *raft.NetworkTransport

	proposals    chan *proposal
	shutdownCh   chan struct{}
	proposerDone chan struct{}
	leaderDone   chan struct{}
	memberDone   chan struct{}
	scaleDone    chan struct{}
	meter        logMeter   // the entries applied, for scaleSnapshots
	scaler       snapScaler // scaleSnapshots' memory
	notifyCh     chan bool
	closeOnce    sync.Once
	closeErr     error
	metrics      entryMetrics
	stages       *tracer
	snapStats    snapshotRecorder
	clock        clusterClock
	ready        leaderReady
	member       membership
	protos       memberProtocols
	restoreMu    sync.Mutex     // one restore at a time; Shutdown waits for it
	restored     chan struct{}  // a restore replaced the state: restart the leader's run
	applying     sync.WaitGroup // the proposer's entries Raft has not answered; Shutdown waits for them
	snapRestored restoredIndex  // the newest snapshot the FSM restored
	// leaderChanged fires on every leader change this node observes.
	leaderChanged signal
	watchDone     chan struct{}
}

// entryMetrics counts what the proposer packs.
type entryMetrics struct {
	entries  atomic.Uint64
	commands atomic.Uint64
	perEntry *Histogram // commands per entry
	apply    *Histogram // seconds from raft.Apply to results
}

func (m *entryMetrics) observeEntry(cmds int) {
	m.entries.Add(1)
	m.commands.Add(uint64(cmds))
	m.perEntry.Observe(float64(cmds))
}

// Open starts a node: it opens (or creates) the data directory, restores the
// state machine, starts the Raft transport on cfg.RaftAddr and bootstraps a
// new cluster if the config asks for it and the directory is new.
func Open(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := &Node{
		cfg:          cfg,
		logger:       cfg.Logger.With("component", "raft", "node", cfg.ID),
		proposals:    make(chan *proposal, 4*cfg.MaxBatch),
		shutdownCh:   make(chan struct{}),
		proposerDone: make(chan struct{}),
		leaderDone:   make(chan struct{}),
		watchDone:    make(chan struct{}),
		notifyCh:     make(chan bool, 16),
		restored:     make(chan struct{}, 1),
		metrics:      entryMetrics{perEntry: newHistogram(entryBounds), apply: newHistogram(applyBounds)},
		stages:       newTracer(),
		clock:        clusterClock{now: cfg.Now},
		memberDone:   make(chan struct{}),
		scaleDone:    make(chan struct{}),
		scaler:       snapScaler{minState: minScaledState},
	}
	if err := n.open(); err != nil {
		if n.transport != nil {
			n.transport.Close()
		}
		n.closeStores()
		return nil, err
	}
	n.startChecks()
	n.watchLeader()
	go n.runProposer()
	go n.runLeadership()
	go n.watchMembership()
	go n.scaleSnapshots()
	return n, nil
}

func (n *Node) open() error {
	cfg := n.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	removeRestoreFiles(cfg.DataDir)
	var err error
	n.state, err = n.openState(filepath.Join(cfg.DataDir, "state.db"))
	if err != nil {
		return err
	}
	n.fsm, err = fsm.New(n.state, cfg.Logger)
	if err != nil {
		// A record the index rebuild cannot read: the file is damaged in a
		// way the start's page check does not see. Rebuild it too.
		path := n.state.Path()
		n.closePageCheck()
		n.state.Close()
		n.state = nil
		if err := n.setAside(path, fmt.Errorf("load state: %w", err)); err != nil {
			return err
		}
		if n.state, err = n.openState(path); err != nil {
			return err
		}
		if n.fsm, err = fsm.New(n.state, cfg.Logger); err != nil {
			return fmt.Errorf("load state: %w", err)
		}
	}
	n.logStore, err = openLogStore(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		return fmt.Errorf("open raft log: %w", err)
	}
	hlog := raftLogger(n.logger, cfg.RaftLogLevel)
	n.snaps, err = newSnapshotStore(cfg.DataDir, 2, hlog)
	if err != nil {
		return fmt.Errorf("open snapshots: %w", err)
	}
	n.snapStats.load(n.snaps)
	n.snapRestored.snaps = n.snaps
	if err := n.catchUpFromSnapshot(); err != nil {
		return err
	}
	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("raft address %q: %w", cfg.RaftAddr, err)
	}
	if cfg.TLS != nil {
		n.transport, err = newTLSTransport(cfg.RaftAddr, advertise(addr), cfg.TLS, hlog)
	} else {
		n.transport, err = raft.NewTCPTransportWithLogger(cfg.RaftAddr, advertise(addr), 3, 10*time.Second, hlog)
	}
	if err != nil {
		return fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = min(cfg.HeartbeatTimeout, rc.LeaderLeaseTimeout)
	rc.CommitTimeout = min(50*time.Millisecond, cfg.HeartbeatTimeout/2)
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.ShutdownOnRemove = false // a removed node stays up to say so; see membership.go
	rc.NotifyCh = n.notifyCh
	rc.BatchApplyCh = true
	rc.NoSnapshotRestoreOnStart = true // the state file is newer; see catchUpFromSnapshot
	var logs raft.LogStore = n.logStore
	if cfg.FsyncDelay > 0 {
		logs = &slowLogStore{LogStore: n.logStore, delay: cfg.FsyncDelay}
	}
	logs = tracedLogs{LogStore: logs, t: n.stages}
	detached, err := newLogCache(logs)
	if err != nil {
		return err
	}
	var cache raft.LogStore = detached
	if cfg.BeforeLogWrite != nil {
		cache = &heldLogStore{LogStore: detached, before: cfg.BeforeLogWrite}
	}
	if err := n.bootstrap(rc); err != nil {
		return err
	}
	n.loadRemoved()
	n.loadProtocols()
	onFatal := cfg.OnFatal
	if onFatal == nil {
		onFatal = fatalExit(n.logger, cfg.DataDir, os.Exit)
	}
	n.onFatal = onFatal
	n.fsm.OnFatal(onFatal)
	trans := tracedTransport{serialHeartbeats: serialHeartbeats{n.transport}, t: n.stages}
	n.raft, err = raft.NewRaft(rc, &timedFSM{FSM: n.fsm, rec: &n.snapStats, stages: n.stages, meter: &n.meter, writeRate: n.cfg.SnapshotWriteRate, stop: n.shutdownCh, restored: &n.snapRestored, restore: n.restoreChecked}, cache, n.logStore, n.snaps, trans)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	return nil
}

// advertise replaces an unspecified bind address with loopback so peers get
// something dialable, and resolves port 0 to the chosen port later.
func advertise(a *net.TCPAddr) net.Addr {
	if a.IP == nil || a.IP.IsUnspecified() {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: a.Port}
	}
	if a.Port == 0 {
		return nil // let the transport advertise what it bound
	}
	return a
}

// catchUpFromSnapshot restores the newest snapshot into the state file if
// the file is older than it (a state file that lost unsynced commits, or a
// fresh data dir seeded with snapshots). Otherwise the state file, which
// records its own applied index, is already at least as new.
func (n *Node) catchUpFromSnapshot() error {
	metas, err := n.snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	if len(metas) == 0 || metas[0].Index <= n.fsm.Applied() {
		return nil
	}
	if n.quietThrough(n.fsm.Applied(), metas[0].Index) >= metas[0].Index {
		// Only no-ops and barriers (a leader's first entry, a leadership
		// barrier) lie between: the state is the snapshot's already, and
		// restoring would rewrite the whole state file for nothing.
		n.logger.Info("state file at snapshot (only no-ops between)", "state_index", n.fsm.Applied(), "snapshot_index", metas[0].Index)
		n.snapRestored.v.Store(metas[0].Index)
		return nil
	}
	_, rc, err := n.snaps.Open(metas[0].ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", metas[0].ID, err)
	}
	n.logger.Info("state file behind snapshot; restoring", "state_index", n.fsm.Applied(), "snapshot_index", metas[0].Index)
	if err := n.restoreChecked(rc); err != nil {
		return err
	}
	n.snapRestored.v.Store(metas[0].Index)
	return nil
}

func (n *Node) bootstrap(rc *raft.Config) error {
	has, err := raft.HasExistingState(n.logStore, n.logStore, n.snaps)
	if err != nil {
		return fmt.Errorf("check existing state: %w", err)
	}
	if has {
		return nil
	}
	if hasStagedRestore(n.cfg.DataDir) && (!n.cfg.Bootstrap || len(n.cfg.Peers) > 0) {
		return fmt.Errorf("%s holds a backup staged by `workron restore --data`: start this node alone with --bootstrap "+
			"(no --peers), then the others with empty data directories and --join", n.cfg.DataDir)
	}
	if !n.cfg.Bootstrap && len(n.cfg.Peers) == 0 {
		return nil
	}
	var conf raft.Configuration
	if n.cfg.Bootstrap {
		conf.Servers = []raft.Server{{ID: rc.LocalID, Address: n.transport.LocalAddr(), Suffrage: raft.Voter}}
	}
	for _, p := range n.cfg.Peers {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr), Suffrage: raft.Voter})
	}
	if err := raft.BootstrapCluster(rc, n.logStore, n.logStore, n.snaps, n.transport, conf); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// Shutdown stops the node: a leader first hands leadership to a peer, then
// Raft stops and the files close. Safe to call twice.
//
// Before Raft stops, Shutdown waits until Raft has answered every future it
// was handed through its apply queue: the proposer's entries, the
// leadership Barrier (runLeadership) and a restore's closing no-op.
// hashicorp/raft gives those futures no shutdown channel (hashicorp/raft#498,
// still so in v1.8.0): one still queued when Raft shuts down is never
// taken, and its Error waits for ever. While Raft runs it answers each: a
// leader applies it or, on losing leadership, answers ErrLeadershipLost; a
// follower answers ErrNotLeader. So the wait lasts as long as the leader's
// log write under way (which Raft's own shutdown waits for too) and the
// entries' commit, or, for a leader cut off from its peers, until its lease
// runs out (HeartbeatTimeout).
func (n *Node) Shutdown() error {
	n.closeOnce.Do(func() {
		if n.raft != nil && n.raft.State() == raft.Leader && len(n.raft.GetConfiguration().Configuration().Servers) > 1 {
			if err := n.TransferLeadership(context.Background()); err != nil {
				n.logger.Warn("leadership transfer failed", "err", err)
			} else {
				n.logger.Info("handed leadership over before shutting down")
			}
		}
		close(n.shutdownCh)
		<-n.watchDone
		<-n.leaderDone
		<-n.proposerDone
		<-n.memberDone
		<-n.scaleDone
		n.applying.Wait()  // the proposer has stopped: no more are added
		n.restoreMu.Lock() // a restore under way ends first; later ones see shutdownCh
		if n.raft != nil {
			n.closeErr = n.raft.Shutdown().Error()
		}
		n.restoreMu.Unlock()
		n.waitCheck() // after Raft: no restore starts another now
		if n.transport != nil {
			// Close alone stops the listener but keeps pooled outbound
			// connections open, and with them the peers' handlers
			// reading from them: release them too.
			n.transport.CloseStreams()
			n.transport.Close()
		}
		n.closeStores()
	})
	return n.closeErr
}

func (n *Node) closeStores() {
	if n.logStore != nil {
		n.logStore.Close()
	}
	if n.state != nil {
		n.closePageCheck()
		err := n.state.Sync()
		if cerr := n.state.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			os.Remove(dirtyMarker(n.state.Path()))
		}
	}
}

// FSM is the node's state machine, for reads.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Now is the cluster time: the time this node stamps into the entries it
// proposes, never behind the last applied entry's time when it gained
// leadership (see clusterClock). Leader loops should read it rather than
// the wall clock.
func (n *Node) Now() time.Time { return n.clock.Now() }

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr is the address peers reach this node's Raft transport at.
func (n *Node) RaftAddr() string { return string(n.transport.LocalAddr()) }

// IsLeader reports whether this node believes it leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Role is "leader", "follower", "candidate" or "shutdown".
func (n *Node) Role() string {
	switch n.raft.State() {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Follower:
		return "follower"
	}
	return "shutdown"
}

// Leader returns the current leader's id and Raft address, empty if none.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// VerifyLeader confirms with a quorum that this node still leads, and that
// its state machine has applied everything committed before its term (it
// waits for that after an election), so reads from its state are not stale:
// they see every write acknowledged before the call.
func (n *Node) VerifyLeader(ctx context.Context) error {
	if err := n.waitLeaderReady(ctx); err != nil {
		return err
	}
	term, _ := n.ready.get()
	if err := wait(ctx, n.raft.VerifyLeader()); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return ErrNotLeader
		}
		return fmt.Errorf("verify leader: %w", err)
	}
	if n.raft.CurrentTerm() != term {
		return ErrNotLeader // leadership changed meanwhile
	}
	return nil
}

// CommitIndex is the highest log index this node knows to be committed:
// on the leader its own, on a follower the leader's as last heard.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// Server is one member of the Raft configuration.
type Server struct {
	ID    string
	Addr  string
	Voter bool
}

// Servers lists the Raft configuration's members.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("get configuration: %w", err)
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// AddVoter adds (or re-addresses) a voting member. Leader only.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	n.member.changing.Lock()
	defer n.member.changing.Unlock()
	if err := wait(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 0)); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", id, addr, mapMembershipError(err))
	}
	return nil
}

// RemoveServer removes a member. Leader only.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	n.member.changing.Lock()
	defer n.member.changing.Unlock()
	if err := wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, 0)); err != nil {
		return fmt.Errorf("remove server %s: %w", id, mapMembershipError(err))
	}
	return nil
}

func mapMembershipError(err error) error {
	if errors.Is(err, raft.ErrNotLeader) {
		return ErrNotLeader
	}
	return err
}

// Stats are counters for metrics and status pages.
type Stats struct {
	Term, CommitIndex, AppliedIndex, LastLogIndex uint64
	LastContact                                   time.Time
	// Entries and Commands count the log entries this node proposed and
	// the commands packed into them.
	Entries, Commands uint64
	// CommandsPerEntry is a histogram of the commands per proposed entry.
	CommandsPerEntry HistogramSnapshot
	// ApplyLatency is a histogram of the seconds from handing a proposed
	// entry to Raft to having its results (committed and applied here).
	ApplyLatency HistogramSnapshot
	// Stages are where the time of the entries this node proposed went,
	// stage by stage (see StageStats).
	Stages StageStats
	// Snapshot describes the newest Raft snapshot.
	Snapshot SnapshotStats
	// ClockAhead is how far the cluster time (what this node stamps as
	// leader, or the last entry's time) is ahead of this node's clock.
	ClockAhead time.Duration
	// SnapshotThreshold is the log entries between snapshots in force
	// (Config.SnapshotLogRatio scales it with the state file).
	SnapshotThreshold uint64
}

// Stats reads the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		Term:             n.raft.CurrentTerm(),
		CommitIndex:      n.raft.CommitIndex(),
		AppliedIndex:     n.AppliedIndex(),
		LastLogIndex:     n.raft.LastIndex(),
		LastContact:      n.raft.LastContact(),
		Entries:          n.metrics.entries.Load(),
		Commands:         n.metrics.commands.Load(),
		CommandsPerEntry: n.metrics.perEntry.snapshot(),
		ApplyLatency:     n.metrics.apply.snapshot(),
		Stages:           n.stages.stats(),
		Snapshot:         n.snapStats.stats(),
		ClockAhead:       n.clock.ahead(n.fsm.LastNow()),

		SnapshotThreshold: n.raft.ReloadableConfig().SnapshotThreshold,
	}
}

// Snapshot takes a Raft snapshot now (tests and backups).
func (n *Node) Snapshot() error {
	return n.raft.Snapshot().Error()
}

// WriteBackup writes a consistent copy of the state to w.
func (n *Node) WriteBackup(w io.Writer) (int64, error) {
	sn, err := n.fsm.Snapshot()
	if err != nil {
		return 0, err
	}
	defer sn.Release()
	cw := &countWriter{w: w}
	err = sn.Persist(&writerSink{Writer: cw})
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// writerSink adapts an io.Writer to raft.SnapshotSink for backups.
type writerSink struct{ io.Writer }

func (writerSink) ID() string    { return "backup" }
func (writerSink) Cancel() error { return nil }
func (writerSink) Close() error  { return nil }

// wait waits for a Raft future, giving up (but not cancelling it) when ctx ends.
func wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	}
}
