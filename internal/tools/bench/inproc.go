package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/workron/workron/internal/testkit/poll"
)

// NodeConfig is one node of the bench's in-process cluster: 127.0.0.1 with
// free ports, the server's default (fsync'd) storage settings, 500ms Raft
// timeouts, error-level logs.
type NodeConfig struct {
	ID      string
	DataDir string
	// Join are the HTTP URLs of the nodes already up; none: bootstrap.
	Join []string
	// RaftTimeout is the Raft heartbeat and election timeout.
	RaftTimeout time.Duration
	// Args are more `workron server` flags (Config.NodeArgs).
	Args []string
	// Logs gets the node's log lines (io.Discard unless Config.NodeLogs).
	Logs io.Writer
}

// Node is a node the bench started in this process.
type Node interface {
	// URL is the node's advertised HTTP base URL.
	URL() string
	// IsLeader reports whether the node leads now.
	IsLeader() bool
	// Shutdown stops the node (a leader hands leadership on first).
	Shutdown() error
}

// StartNodeFunc starts one node in this process and returns once it serves
// HTTP. It is the one place the bench assembles a node.
type StartNodeFunc func(ctx context.Context, cfg NodeConfig) (Node, error)

// inprocCluster is three nodes started in this process.
type inprocCluster struct {
	dir   string
	urls  []string
	nodes []Node
}

// startInprocCluster starts three nodes with cfg.StartNode, the first
// bootstrapping and the others joining through it, and waits until all
// three agree on a leader that knows every member's address.
func startInprocCluster(ctx context.Context, b *bencher) (*inprocCluster, error) {
	dir, err := os.MkdirTemp("", "workron-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench data dir: %w", err)
	}
	c := &inprocCluster{dir: dir}
	fail := func(err error) (*inprocCluster, error) {
		c.stop()
		return nil, err
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("bench%d", i)
		// The nodes' own logs (Raft's complaints while the cluster shuts
		// down, mostly) would bury the figures: show them only on request.
		var logs io.Writer = io.Discard
		if b.cfg.NodeLogs {
			logs = b.stderr
		}
		n, err := b.cfg.StartNode(ctx, NodeConfig{ID: id, DataDir: filepath.Join(dir, id), Join: slices.Clone(c.urls),
			RaftTimeout: 500 * time.Millisecond, Args: b.cfg.NodeArgs, Logs: logs})
		if err != nil {
			return fail(fmt.Errorf("start node %s: %w", id, err))
		}
		c.nodes = append(c.nodes, n)
		c.urls = append(c.urls, n.URL())
		// The first node bootstraps and the others join through it: wait
		// until it leads, then until all agree.
		if i == 1 || i == 3 {
			if err := poll.True(ctx, 30*time.Second, 50*time.Millisecond, func() bool { return b.healthy(ctx, c.urls) }); err != nil {
				return fail(fmt.Errorf("wait for %d nodes to agree on a leader: %w", i, err))
			}
		}
	}
	return c, nil
}

// stop shuts the nodes down one by one, the current leader first (it hands
// leadership on), and removes their data.
func (c *inprocCluster) stop() {
	left := slices.Clone(c.nodes)
	for len(left) > 0 {
		i := max(slices.IndexFunc(left, func(n Node) bool { return n.IsLeader() }), 0)
		_ = left[i].Shutdown()
		left = slices.Delete(left, i, i+1)
	}
	os.RemoveAll(c.dir)
}
