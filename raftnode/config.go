package raftnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Peer is one voter of a cluster bootstrapped from a fixed list.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers parses "id=host:port,id=host:port".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peers: %q is not id=host:port", part)
		}
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

// Config configures a Node.
type Config struct {
	// ID is this node's unique name in the cluster. Required.
	ID string
	// RaftAddr is the host:port the Raft transport binds and advertises.
	// Port 0 picks a free port (tests). Required.
	RaftAddr string
	// DataDir holds the Raft log, snapshots and the state file. Required.
	DataDir string
	// Bootstrap forms a new one-node cluster if DataDir holds no state.
	Bootstrap bool
	// Peers forms a new cluster of these voters if DataDir holds no state;
	// every node is started with the same list. It must include this node.
	Peers []Peer

	// HeartbeatTimeout and ElectionTimeout are Raft's; a leader is replaced
	// about this long after it stops. Default to 1s each.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// ApplyTimeout bounds how long a proposal may wait to be enqueued in
	// Raft when the caller's context has no deadline. Defaults to 10s.
	ApplyTimeout time.Duration
	// ProtocolWait bounds how long a member of the configuration whose
	// protocol version is not known yet holds back what needs more than
	// protocol 1 (see AwaitProtocol): counted from when this node first
	// looks for it, after which it counts as protocol 1 until it is heard
	// from. 0 counts it as 1 at once. Defaults to 5s.
	ProtocolWait time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one. Defaults to 8192.
	SnapshotThreshold uint64
	// SnapshotLogRatio, when above 0, raises the threshold as the state
	// file grows past 64 MiB: to the entries whose bytes add up to this
	// share of the state file, so that a snapshot (a copy of the whole
	// file) writes at most 1/SnapshotLogRatio bytes per byte of log
	// applied, and the log between snapshots stays under this share of the
	// file (snapscale.go). Defaults to 0.25.
	SnapshotLogRatio float64
	// SnapshotInterval is how often to check the threshold: Raft checks
	// at a random time between it and twice it. Defaults to 30s.
	SnapshotInterval time.Duration
	// SnapshotWriteRate is the most bytes a second this node writes a
	// snapshot at (snappace.go); 0 writes it as fast as it can.
	SnapshotWriteRate int64
	// TrailingLogs is how many log entries a snapshot leaves in the log.
	// A follower missing an entry older than those (it was down, or slow,
	// while a snapshot compacted the log) is sent the whole snapshot
	// instead of entries. Defaults to 10240.
	TrailingLogs uint64
	// StateFsync makes every commit of the state file fsync. Off by
	// default: the Raft log is fsync'd and is the durable record, a reply is
	// sent only after its entry is committed there, and a state file that a
	// crash may have left damaged is verified at the next start and rebuilt
	// from the snapshot and the log if need be. Defaults to false.
	StateFsync bool
	// StateCheck says when a start checks the state file's pages
	// (store.VerifyPages, a read of the whole file): StateCheckAuto (the
	// default, also "") before serving only where damage is possible, else
	// in the background once serving; StateCheckStart always before
	// serving. See openState.
	StateCheck string

	// MaxBatch is the most commands packed into one log entry. Defaults to 512.
	MaxBatch int
	// MaxInflight is the most entries proposed but not yet applied. An
	// entry goes out at once when none is in flight or callers come one at
	// a time (the last entry carried one caller's commands). Otherwise one
	// goes out beside an entry in flight only when it is full (MaxBatch
	// commands, or commands submitting MaxBatch jobs: a batch submit) or
	// has waited for one entry to finish, so small commands that arrive
	// meanwhile pack into one entry instead of paying a log write and an
	// apply transaction on every node each, while a large entry's apply
	// overlaps the next one's writes (runProposer; docs/performance.md). 1
	// sends nothing beside an entry in flight. Defaults to 2.
	MaxInflight int

	// OnLeader, if set, runs in its own goroutine each time this node becomes
	// leader, after a Barrier; its ctx is cancelled when leadership is lost
	// or the node shuts down, and the node waits for it to return.
	OnLeader func(ctx context.Context)

	// OnFatal is called, from Raft's goroutine that applies entries, when
	// this node cannot apply a committed entry because its state file
	// cannot be written (a full or failing disk; the error is a
	// *fsm.StateWriteError). A node cannot skip an entry, so it must stop:
	// OnFatal must not return. Defaults to one ERROR log line naming the
	// data directory, then os.Exit(1); started again once the disk has
	// room, the node applies the log from where it stopped.
	OnFatal func(err error)

	// Logger receives the node's logs. Defaults to discarding them.
	Logger *slog.Logger
	// RaftLogLevel is hashicorp/raft's own log level (trace, debug, info,
	// warn, error or off); "" is WARN. Its lines then pass the node's own
	// logger's level too.
	RaftLogLevel string

	// Now is the clock the leader stamps into every entry (fsm.Entry.Now).
	// Defaults to time.Now. A test hook (workron server --clock-offset)
	// shifts it to simulate a node whose clock jumped.
	Now func() time.Time
	// FsyncDelay, a test hook, sleeps this long before every write to the
	// Raft log, to simulate a slow disk (workron server
	// --raft-fsync-delay). Defaults to 0.
	FsyncDelay time.Duration
	// BeforeLogWrite, a test hook, is called as every write to the Raft
	// log starts, before any log store has seen it, and the write waits
	// for it to return: a test holds the leader's write with it. Defaults
	// to nil.
	BeforeLogWrite func()

	// TLS, when set, makes the Raft transport speak TLS in both directions
	// with this configuration, which must hold the node's certificate, the
	// cluster's CA as RootCAs and ClientCAs, and ClientAuth
	// tls.RequireAndVerifyClientCert: a host without a certificate from
	// the CA can then neither vote, nor send entries, nor receive them.
	// Peers dial the advertised address, which their certificates must
	// name. Nil (the default) is plain TCP.
	TLS *tls.Config
}

// DefaultConfig returns a Config with every optional field at its default.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:  time.Second,
		ElectionTimeout:   time.Second,
		ApplyTimeout:      10 * time.Second,
		ProtocolWait:      5 * time.Second,
		SnapshotThreshold: 8192,
		SnapshotLogRatio:  0.25,
		SnapshotInterval:  30 * time.Second,
		TrailingLogs:      10240,
		SnapshotWriteRate: 64 << 20,
		MaxBatch:          512,
		MaxInflight:       2,
		RaftLogLevel:      "WARN",
	}
}

// Validate names the first field that is missing or out of bounds.
func (c *Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("raftnode: ID is required")
	case c.RaftAddr == "":
		return fmt.Errorf("raftnode: RaftAddr is required")
	case c.DataDir == "":
		return fmt.Errorf("raftnode: DataDir is required")
	case c.Bootstrap && len(c.Peers) > 0:
		return fmt.Errorf("raftnode: Bootstrap and Peers exclude each other")
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return fmt.Errorf("raftnode: HeartbeatTimeout must be at least 5ms, got %s", c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return fmt.Errorf("raftnode: ElectionTimeout (%s) must be at least HeartbeatTimeout (%s)", c.ElectionTimeout, c.HeartbeatTimeout)
	case c.ApplyTimeout <= 0:
		return fmt.Errorf("raftnode: ApplyTimeout must be positive")
	case c.ProtocolWait < 0 || c.ProtocolWait > time.Minute:
		return fmt.Errorf("raftnode: ProtocolWait must be between 0 and 1m, got %s", c.ProtocolWait)
	case c.SnapshotThreshold < 1:
		return fmt.Errorf("raftnode: SnapshotThreshold must be at least 1, got %d", c.SnapshotThreshold)
	case c.SnapshotLogRatio < 0 || c.SnapshotLogRatio > 100:
		return fmt.Errorf("raftnode: SnapshotLogRatio must be from 0 to 100, got %g", c.SnapshotLogRatio)
	case c.SnapshotInterval < 5*time.Millisecond:
		return fmt.Errorf("raftnode: SnapshotInterval must be at least 5ms, got %s", c.SnapshotInterval)
	case c.RaftLogLevel != "" && hclog.LevelFromString(c.RaftLogLevel) == hclog.NoLevel:
		return fmt.Errorf("raftnode: RaftLogLevel must be trace, debug, info, warn, error or off, got %q", c.RaftLogLevel)
	case c.SnapshotWriteRate < 0:
		return fmt.Errorf("raftnode: SnapshotWriteRate must not be negative, got %d", c.SnapshotWriteRate)
	case c.TrailingLogs < 1:
		return fmt.Errorf("raftnode: TrailingLogs must be at least 1, got %d", c.TrailingLogs)
	case c.MaxBatch < 1 || c.MaxBatch > 65536:
		return fmt.Errorf("raftnode: MaxBatch must be in 1..65536, got %d", c.MaxBatch)
	case c.MaxInflight < 1 || c.MaxInflight > 1024:
		return fmt.Errorf("raftnode: MaxInflight must be in 1..1024, got %d", c.MaxInflight)
	case c.StateCheck != "" && c.StateCheck != StateCheckAuto && c.StateCheck != StateCheckStart:
		return fmt.Errorf("raftnode: StateCheck must be %q or %q, got %q", StateCheckAuto, StateCheckStart, c.StateCheck)
	case c.FsyncDelay < 0:
		return fmt.Errorf("raftnode: FsyncDelay must not be negative, got %s", c.FsyncDelay)
	}
	if len(c.Peers) > 0 {
		found := false
		for _, p := range c.Peers {
			if p.ID == c.ID {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("raftnode: Peers must include this node's ID %q", c.ID)
		}
	}
	return nil
}
