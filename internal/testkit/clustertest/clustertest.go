// Package clustertest builds real Workron clusters inside one test process:
// every node is a node.Node (node: Raft, API, HTTP and leader
// loops, as `workron server` assembles them), on 127.0.0.1 with ports picked by the kernel and data in t.TempDir(). It
// owns starting, killing and restarting nodes and the checks that compare
// them; it never reaches into a node's state except through the node's own
// read methods (Applied, Digest, Check).
//
// Node 1 bootstraps a one-node cluster; the others start empty and ask node 1
// to add them through POST /cluster/join, the path `workron server --join`
// takes, so the announce loop of api.Server is exercised as in production.
//
// Timeouts are short (500 ms Raft heartbeat and election, 50 ms reap
// interval, 2 s lease TTL by default) so tests can poll with deadlines of a
// few seconds. Methods that can fail take the calling test's testing.TB, so
// subtests may share one Cluster.
//
// # Environment
//
// WORKRON_TEST_RAFT_TIMEOUT (a Go duration) overrides the default Raft
// timeouts, for slow or fast machines; WithRaftTimeout still wins.
// WORKRON_TEST_LOG=1 sends every node's logs to stderr at debug level.
package clustertest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/node"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// Defaults of a cluster's timeouts.
const (
	// DefaultRaftTimeout is Raft's heartbeat and election timeout, and so
	// also the leader's lease (raftnode derives it). At 50 ms a 3-node
	// cluster under -race on 2 cores held elections every second or so
	// once one node was down (a lone follower that stalls for 50 ms makes
	// the leader step down); at 200 ms the machine, shared with fuzzers,
	// still stalled a leader for 250 ms now and then. A spurious election
	// turns a request in flight into 504 outcome_unknown, so tests use a
	// margin; failover itself (Kill hands leadership over) stays fast.
	DefaultRaftTimeout  = 500 * time.Millisecond
	DefaultLeaseTTL     = 2 * time.Second
	DefaultReapInterval = 50 * time.Millisecond
	DefaultMaxWait      = 10 * time.Second
	// FormTimeout bounds how long New waits for the cluster to form, and
	// Leader for a leader to be elected and known everywhere.
	FormTimeout = 15 * time.Second
)

// Option changes how New builds a cluster.
type Option func(*options)

type options struct {
	raftTimeout  time.Duration
	leaseTTL     time.Duration
	reapInterval time.Duration
	maxWait      time.Duration
	logger       *slog.Logger
	raftLogLevel string
	mutate       func(i int, nc *node.Config)
}

// WithLeaseTTL sets api.Config.LeaseTTL. Defaults to DefaultLeaseTTL.
func WithLeaseTTL(d time.Duration) Option { return func(o *options) { o.leaseTTL = d } }

// WithReapInterval sets the reaper's interval (leader.ReaperConfig.Interval). Defaults to DefaultReapInterval.
func WithReapInterval(d time.Duration) Option { return func(o *options) { o.reapInterval = d } }

// WithRaftTimeout sets Raft's heartbeat and election timeouts. Defaults to
// DefaultRaftTimeout.
func WithRaftTimeout(d time.Duration) Option { return func(o *options) { o.raftTimeout = d } }

// WithLogger sends every node's logs to l. By default they are discarded,
// unless WORKRON_TEST_LOG is set, which logs at debug level to stderr.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithConfig lets a test change node i's config (i counts from 0) after the
// helper filled it and before the node starts; it also runs on Restart.
func WithConfig(fn func(i int, nc *node.Config)) Option {
	return func(o *options) { o.mutate = fn }
}

// Node is one member of a test cluster; tests read it through its methods.
type Node struct {
	id       string
	dir      string
	httpAddr string // host:port, fixed after the first start
	raftAddr string // host:port, fixed after the first start

	// Set while the node runs; nil after Kill.
	n    *node.Node
	raft *raftnode.Node
	api  *api.Server
}

// ID is the node's Raft id ("n1", "n2", …).
func (n *Node) ID() string { return n.id }

// URL is the node's HTTP base URL, e.g. "http://127.0.0.1:41234".
func (n *Node) URL() string { return "http://" + n.httpAddr }

// HTTPAddr is the node's HTTP host:port, as X-Workron-Leader names it.
func (n *Node) HTTPAddr() string { return n.httpAddr }

// DataDir is the node's data directory.
func (n *Node) DataDir() string { return n.dir }

// Raft is the running raftnode.Node, or nil while the node is killed.
func (n *Node) Raft() *raftnode.Node { return n.raft }

// API is the running api.Server, or nil while the node is killed.
func (n *Node) API() *api.Server { return n.api }

// Running reports whether the node is started.
func (n *Node) Running() bool { return n.raft != nil }

// Cluster is a set of nodes started by New. Its methods are not safe for
// concurrent use with Kill and Restart; call those from the test goroutine.
type Cluster struct {
	opts  options
	nodes []*Node
}

// New starts n nodes, waits until they form one cluster in which every node
// knows every member's HTTP address and the applied index is equal on all,
// and registers a cleanup that checks every running node's store and shuts
// the cluster down.
func New(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("clustertest.New: need at least one node, got %d", n)
	}
	o := options{
		raftTimeout:  DefaultRaftTimeout,
		leaseTTL:     DefaultLeaseTTL,
		reapInterval: DefaultReapInterval,
		maxWait:      DefaultMaxWait,
		raftLogLevel: "WARN",
	}
	if v := os.Getenv("WORKRON_TEST_RAFT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			tb.Fatalf("WORKRON_TEST_RAFT_TIMEOUT: %v", err)
		}
		o.raftTimeout = d
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
		if os.Getenv("WORKRON_TEST_LOG") != "" {
			o.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	c := &Cluster{opts: o}
	for i := range n {
		c.nodes = append(c.nodes, &Node{
			id:       fmt.Sprintf("n%d", i+1),
			dir:      filepath.Join(tb.TempDir(), fmt.Sprintf("n%d", i+1)),
			httpAddr: "127.0.0.1:0",
			raftAddr: "127.0.0.1:0",
		})
	}
	// Registered after the first TempDir, so it runs before the
	// directories are removed (cleanups run last first): removing them
	// under running nodes fails when a node writes a file meanwhile.
	tb.Cleanup(func() { c.shutdown(tb) })
	if err := c.start(0); err != nil {
		tb.Fatalf("start n1: %v", err)
	}
	WaitFor(tb, FormTimeout, func() error {
		if !c.nodes[0].raft.IsLeader() {
			return errors.New("n1 is not leader yet")
		}
		return nil
	})
	for i := 1; i < n; i++ {
		if err := c.start(i); err != nil {
			tb.Fatalf("start %s: %v", c.nodes[i].id, err)
		}
	}
	WaitFor(tb, FormTimeout, c.formed)
	c.Converged(tb, FormTimeout)
	return c
}

// Join starts one more node, empty, that asks the running nodes to add it
// (POST /cluster/join, as New's nodes do), and returns its index. It does
// not wait: the join adds it as a non-voter, and the leader makes it a
// voter once it has caught up (WaitFormed waits for that).
func (c *Cluster) Join(tb testing.TB) int {
	tb.Helper()
	i := len(c.nodes)
	c.nodes = append(c.nodes, &Node{
		id:       fmt.Sprintf("n%d", i+1),
		dir:      filepath.Join(tb.TempDir(), fmt.Sprintf("n%d", i+1)),
		httpAddr: "127.0.0.1:0",
		raftAddr: "127.0.0.1:0",
	})
	if err := c.start(i); err != nil {
		tb.Fatalf("start %s: %v", c.nodes[i].id, err)
	}
	return i
}

// WaitFormed waits up to timeout until every running node lists every node
// as a voter, agrees on the leader and holds every node's HTTP address.
func (c *Cluster) WaitFormed(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	WaitFor(tb, timeout, c.formed)
}

// start starts node i. The first start binds port 0; later starts bind
// the same addresses again.
func (c *Cluster) start(i int) error {
	nd := c.nodes[i]
	ln, err := net.Listen("tcp", nd.httpAddr)
	if err != nil {
		return fmt.Errorf("listen http on %s: %w", nd.httpAddr, err)
	}
	nc := node.DefaultConfig()
	nc.Listener = ln
	nc.API.AdvertiseHTTP = "http://" + ln.Addr().String()
	nc.ReadHeaderTimeout, nc.ReadTimeout, nc.IdleTimeout, nc.MaxHeaderBytes = 5*time.Second, 30*time.Second, 30*time.Second, 0
	nc.Logger = c.opts.logger.With("node", nd.id)
	rc := &nc.Raft
	rc.ID, rc.RaftAddr, rc.DataDir = nd.id, nd.raftAddr, nd.dir
	rc.Bootstrap = i == 0
	rc.HeartbeatTimeout, rc.ElectionTimeout = c.opts.raftTimeout, c.opts.raftTimeout
	rc.ApplyTimeout = 5 * time.Second
	rc.RaftLogLevel = c.opts.raftLogLevel
	nc.API.LeaseTTL, nc.API.MaxWait = c.opts.leaseTTL, c.opts.maxWait
	nc.Leader.Reaper.Interval = c.opts.reapInterval
	nc.Leader.Promoter.Interval = 50 * time.Millisecond // a joined node votes soon after it caught up
	for k, other := range c.nodes {
		if k != i && other.httpAddr != "127.0.0.1:0" {
			nc.API.JoinURLs = append(nc.API.JoinURLs, other.URL())
		}
	}
	if c.opts.mutate != nil {
		c.opts.mutate(i, &nc)
	}
	n, err := node.Start(nc) // closes ln on error
	if err != nil {
		return err
	}
	nd.httpAddr, nd.raftAddr = n.Addr(), n.Raft().RaftAddr()
	nd.n, nd.raft, nd.api = n, n.Raft(), n.API()
	return nil
}

// stop shuts node i down the way `workron server` does (node.Node.Shutdown):
// HTTP first (which ends long-polls), then Raft (a leader hands leadership
// to a peer first).
func (c *Cluster) stop(i int) error {
	nd := c.nodes[i]
	if nd.n == nil {
		return nil
	}
	err := nd.n.Shutdown()
	nd.n, nd.raft, nd.api = nil, nil, nil
	return err
}

// shutdown checks every running node's store and stops them all.
func (c *Cluster) shutdown(tb testing.TB) {
	tb.Helper()
	var term uint64
	for _, nd := range c.running() {
		term = max(term, nd.raft.Stats().Term)
	}
	tb.Logf("cluster shut down at Raft term %d", term)
	for i, nd := range c.nodes {
		if nd.raft == nil {
			continue
		}
		if _, err := os.Stat(nd.dir); err != nil {
			tb.Errorf("%s: its data directory went before the node stopped (cleanup order): %v", nd.id, err)
		}
		if err := nd.raft.FSM().Check(); err != nil {
			tb.Errorf("%s: store check at cleanup: %v", nd.id, err)
		}
		if err := c.stop(i); err != nil {
			tb.Errorf("%s: shutdown: %v", nd.id, err)
		}
	}
}

// formed reports why the cluster is not yet one whole: every running node
// must list every node as a voter, know a leader, and hold every node's
// HTTP address in its state.
func (c *Cluster) formed() error {
	var leader string
	for _, nd := range c.running() {
		servers, err := nd.raft.Servers()
		if err != nil {
			return fmt.Errorf("%s: %w", nd.id, err)
		}
		voters := 0
		for _, s := range servers {
			if s.Voter {
				voters++
			}
		}
		if voters != len(c.nodes) {
			return fmt.Errorf("%s sees %d voters of %d", nd.id, voters, len(c.nodes))
		}
		id, _ := nd.raft.Leader()
		switch {
		case id == "":
			return fmt.Errorf("%s knows no leader", nd.id)
		case leader == "":
			leader = id
		case id != leader:
			return fmt.Errorf("%s says the leader is %s, others %s", nd.id, id, leader)
		}
		nodes, err := nd.raft.FSM().Nodes()
		if err != nil {
			return fmt.Errorf("%s: %w", nd.id, err)
		}
		known := 0
		for _, m := range nodes {
			if m.HTTP != "" {
				known++
			}
		}
		if known != len(c.nodes) {
			return fmt.Errorf("%s knows %d HTTP addresses of %d", nd.id, known, len(c.nodes))
		}
		// The members' protocols are not waited for: a new cluster
		// serves every request at its binary's protocol at once (members
		// not heard from yet are waited for where it matters).
	}
	return nil
}

func (c *Cluster) running() []*Node {
	var out []*Node
	for _, nd := range c.nodes {
		if nd.raft != nil {
			out = append(out, nd)
		}
	}
	return out
}

// Len is the number of nodes, running or not.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node returns node i (counting from 0).
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// URL is node i's HTTP base URL.
func (c *Cluster) URL(i int) string { return c.nodes[i].URL() }

// URLs lists every node's HTTP base URL, running or not.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		out[i] = nd.URL()
	}
	return out
}

// Leader waits until exactly one running node leads, every running node
// agrees on it and knows its HTTP address, and returns its index.
func (c *Cluster) Leader(tb testing.TB) int {
	tb.Helper()
	var leader int
	WaitFor(tb, FormTimeout, func() error {
		leader = -1
		for i, nd := range c.nodes {
			if nd.raft != nil && nd.raft.IsLeader() {
				if leader >= 0 {
					return fmt.Errorf("both %s and %s lead", c.nodes[leader].id, nd.id)
				}
				leader = i
			}
		}
		if leader < 0 {
			return errors.New("no running node leads")
		}
		want := c.nodes[leader]
		for _, nd := range c.running() {
			if id, _ := nd.raft.Leader(); id != want.id {
				return fmt.Errorf("%s says the leader is %q, not %s", nd.id, id, want.id)
			}
			nodes, err := nd.raft.FSM().Nodes()
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(nodes, func(m *store.Node) bool { return m.ID == want.id && m.HTTP == want.URL() }) {
				return fmt.Errorf("%s does not know leader %s's address %s yet", nd.id, want.id, want.URL())
			}
		}
		return nil
	})
	return leader
}

// Followers waits for a leader and returns the running nodes that follow it.
func (c *Cluster) Followers(tb testing.TB) []int {
	tb.Helper()
	l := c.Leader(tb)
	var out []int
	for i, nd := range c.nodes {
		if i != l && nd.raft != nil {
			out = append(out, i)
		}
	}
	return out
}

// Kill shuts node i down: HTTP first, then Raft. Its data directory and
// addresses are kept for Restart. It checks the node's store first.
func (c *Cluster) Kill(tb testing.TB, i int) {
	tb.Helper()
	nd := c.nodes[i]
	if nd.raft == nil {
		tb.Fatalf("Kill(%d): %s is not running", i, nd.id)
	}
	if err := nd.raft.FSM().Check(); err != nil {
		tb.Errorf("%s: store check before kill: %v", nd.id, err)
	}
	if err := c.stop(i); err != nil {
		tb.Errorf("Kill(%d): %v", i, err)
	}
}

// Restart starts a killed node i again on its data directory and addresses.
func (c *Cluster) Restart(tb testing.TB, i int) {
	tb.Helper()
	nd := c.nodes[i]
	if nd.raft != nil {
		tb.Fatalf("Restart(%d): %s is running", i, nd.id)
	}
	// The kernel may hold the old ports for a moment; retry briefly.
	WaitFor(tb, 5*time.Second, func() error { return c.start(i) })
}

// Applied is node i's last applied Raft index.
func (c *Cluster) Applied(i int) uint64 { return c.nodes[i].raft.FSM().Applied() }

// Digest is node i's state digest (see fsm.FSM.Digest).
func (c *Cluster) Digest(tb testing.TB, i int) string {
	tb.Helper()
	d, err := c.nodes[i].raft.FSM().Digest()
	if err != nil {
		tb.Fatalf("digest of %s: %v", c.nodes[i].id, err)
	}
	return d
}

// Snapshot makes node i take a Raft snapshot now.
func (c *Cluster) Snapshot(tb testing.TB, i int) {
	tb.Helper()
	if err := c.nodes[i].raft.Snapshot(); err != nil {
		tb.Fatalf("snapshot %s: %v", c.nodes[i].id, err)
	}
}

// Converged waits until every running node has applied the same index, then
// requires their state digests to be equal at that index, and returns it.
// Digests that differ at an equal index fail the test at once: the nodes
// diverged.
func (c *Cluster) Converged(tb testing.TB, timeout time.Duration) uint64 {
	tb.Helper()
	var index uint64
	WaitFor(tb, timeout, func() error {
		nodes := c.running()
		idx, err := c.equalApplied(nodes)
		if err != nil {
			return err
		}
		digests := make([]string, len(nodes))
		for k, nd := range nodes {
			if digests[k], err = nd.raft.FSM().Digest(); err != nil {
				return fmt.Errorf("%s: %w", nd.id, err)
			}
		}
		// Only digests read while nothing was applied count.
		if again, err := c.equalApplied(nodes); err != nil || again != idx {
			return fmt.Errorf("applied index moved while hashing (%d)", idx)
		}
		for k := range nodes {
			if digests[k] != digests[0] {
				tb.Fatalf("state diverged at applied index %d: %s has digest %.12s, %s has %.12s",
					idx, nodes[0].id, digests[0], nodes[k].id, digests[k])
			}
		}
		index = idx
		return nil
	})
	return index
}

func (c *Cluster) equalApplied(nodes []*Node) (uint64, error) {
	var parts []string
	idx := nodes[0].raft.FSM().Applied()
	equal := true
	for _, nd := range nodes {
		a := nd.raft.FSM().Applied()
		parts = append(parts, fmt.Sprintf("%s=%d", nd.id, a))
		equal = equal && a == idx
	}
	if !equal {
		return 0, fmt.Errorf("applied indexes differ: %s", strings.Join(parts, " "))
	}
	return idx, nil
}

// WaitFor polls cond every 10ms until it returns nil, and fails the test
// with cond's last error if that takes longer than timeout.
func WaitFor(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	poll.Wait(tb, timeout, 10*time.Millisecond, cond)
}
