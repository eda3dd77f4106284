//go:build unix

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/workron/workron/internal/testkit/proccluster"
)

// Cluster timing: short timeouts so that faults and their recovery fit in a
// two-minute run.
const (
	raftTimeout = "200ms"
	leaseTTL    = 2 * time.Second
)

// proc is a process of the shared harness.
type proc = proccluster.Proc

// node is one `workron server` process; its Name is its Raft id.
type node struct {
	proccluster.Node
	i int

	mu          sync.Mutex
	clockOffset time.Duration // the next start's --clock-offset
	fsyncDelay  time.Duration // the next start's --raft-fsync-delay
}

// cluster is the nodes and real workers of one run. Their addresses come
// from the network (namespaces or loopback), so the harness's Cluster only
// finds the leader and waits for nodes here; this file starts them.
type cluster struct {
	dir     string
	bin     string
	net     network
	nodes   []*node
	workers []*proc // the real workers, then (from index real on) the durable ones
	real    int
	durBin  string // the chaosworker binary
	ledger  string // the durable workers' ledger file
	plant   bool   // start the durable workers with --plant-rerun
	peers   string
	pc      *proccluster.Cluster // the same nodes, for Leader and WaitServing
	logf    func(format string, args ...any)
}

func newCluster(dir, bin, durBin string, nw network, nodes, workers, durable int, logf func(string, ...any)) *cluster {
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 5 * time.Second}}
	c := &cluster{dir: dir, bin: bin, durBin: durBin, net: nw, logf: logf, pc: &proccluster.Cluster{HTTP: hc},
		real: workers, ledger: filepath.Join(dir, "ledger.jsonl")}
	var peers []string
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		peers = append(peers, id+"="+nw.nodeAddr(i, "raft"))
		n := &node{i: i, Node: proccluster.Node{URL: "http://" + nw.nodeAddr(i, "http"), Data: filepath.Join(dir, id),
			Proc: proc{Name: id, Bin: bin, Netns: nw.nodeNetns(i), Log: filepath.Join(dir, id+".log"), OwnGroup: true}}}
		c.nodes = append(c.nodes, n)
		c.pc.Nodes = append(c.pc.Nodes, &n.Node)
	}
	c.peers = strings.Join(peers, ",")
	for i := range workers {
		name := fmt.Sprintf("r%d", i+1)
		c.workers = append(c.workers, &proc{Name: name, Bin: bin, Netns: nw.workerNetns(i), Log: filepath.Join(dir, name+".log"), OwnGroup: true})
	}
	for i := range durable {
		name := fmt.Sprintf("d%d", i+1)
		c.workers = append(c.workers, &proc{Name: name, Bin: durBin, Netns: nw.workerNetns(workers + i), Log: filepath.Join(dir, name+".log"), OwnGroup: true})
	}
	return c
}

// nodeArgs are node n's server flags, with its current test hooks.
func (c *cluster) nodeArgs(n *node) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	args := []string{"server", "--id", n.Name, "--http", c.net.nodeAddr(n.i, "http"),
		"--raft", c.net.nodeAddr(n.i, "raft"), "--data", n.Data, "--peers", c.peers,
		"--raft-heartbeat-timeout", raftTimeout, "--raft-election-timeout", raftTimeout,
		"--lease-ttl", leaseTTL.String(), "--reap-interval", "100ms", "--max-wait", "5s",
		"--snapshot-threshold", "2048", "--log-level", "info"}
	if n.clockOffset != 0 {
		args = append(args, "--clock-offset", n.clockOffset.String())
	}
	if n.fsyncDelay != 0 {
		args = append(args, "--raft-fsync-delay", n.fsyncDelay.String())
	}
	return args
}

// startNode starts node n and waits until it answers HTTP.
func (c *cluster) startNode(ctx context.Context, n *node) error {
	return c.startNodes(ctx, n)
}

// startNodes starts the nodes, then waits until each answers HTTP.
func (c *cluster) startNodes(ctx context.Context, nodes ...*node) error {
	offsets := make([]int64, len(nodes))
	for i, n := range nodes {
		off, err := n.Start(c.nodeArgs(n)...)
		if err != nil {
			return err
		}
		offsets[i] = off
	}
	for i, n := range nodes {
		if err := c.pc.WaitServing(ctx, &n.Node, offsets[i], 20*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// restartNode stops n (SIGKILL) and starts it again with its current hooks.
func (c *cluster) restartNode(ctx context.Context, n *node) error {
	n.Kill()
	return c.startNode(ctx, n)
}

// startWorker starts worker i: a real worker, or from index c.real on a
// durable worker.
func (c *cluster) startWorker(i int) error {
	w := c.workers[i]
	if i >= c.real {
		args := []string{"--server", strings.Join(c.pc.URLs(), ","), "--id", w.Name, "--ledger", c.ledger, "--concurrency", "4"}
		if c.plant {
			args = append(args, "--plant-rerun")
		}
		_, err := w.Start(args...)
		return err
	}
	_, err := w.Start("worker", "--server", strings.Join(c.pc.URLs(), ","), "--id", w.Name,
		"--concurrency", "3", "--queues", cronQueue+","+chaosQueue+","+limitedQueue, "--poll-wait", "2s", "--grace", "1s",
		"--kill-grace", "200ms", "--log-level", "warn")
	return err
}

// leader returns the node every running, unpaused node names as leader, or
// nil if they do not agree right now.
func (c *cluster) leader(ctx context.Context) *node {
	l, _, err := c.pc.Leader(ctx)
	if err != nil {
		return nil
	}
	return c.nodeOf(l)
}

// waitLeader polls until the cluster agrees on a leader.
func (c *cluster) waitLeader(ctx context.Context, timeout time.Duration) (*node, error) {
	l, err := c.pc.WaitLeader(ctx, timeout)
	if err != nil {
		return nil, err
	}
	return c.nodeOf(l), nil
}

func (c *cluster) nodeOf(pn *proccluster.Node) *node {
	for _, n := range c.nodes {
		if &n.Node == pn {
			return n
		}
	}
	return nil
}

// workerKind names what worker i is, for the log.
func (c *cluster) workerKind(i int) string {
	if i >= c.real {
		return "durable worker"
	}
	return "real worker"
}

// durableWorkers are the durable workers' processes.
func (c *cluster) durableWorkers() []*proc { return c.workers[c.real:] }

// stopAll kills every process.
func (c *cluster) stopAll() {
	for _, w := range c.workers {
		w.Kill()
	}
	for _, n := range c.nodes {
		n.Kill()
	}
}
