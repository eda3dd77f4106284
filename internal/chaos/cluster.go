//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
)

// Cluster timing: short timeouts so that faults and their recovery fit in a
// two-minute run.
const (
	raftTimeout = "200ms"
	leaseTTL    = 2 * time.Second
)

// node is one `workron server` process.
type node struct {
	proc
	i    int
	id   string
	url  string // http://host:port
	data string

	mu          sync.Mutex
	clockOffset time.Duration // the next start's --clock-offset
	fsyncDelay  time.Duration // the next start's --raft-fsync-delay
}

// cluster is the nodes and real workers of one run.
type cluster struct {
	dir     string
	bin     string
	net     network
	nodes   []*node
	workers []*proc
	peers   string
	hc      *http.Client
	logf    func(format string, args ...any)
}

func newCluster(dir, bin string, nw network, nodes, workers int, logf func(string, ...any)) *cluster {
	c := &cluster{dir: dir, bin: bin, net: nw, logf: logf,
		hc: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 5 * time.Second}}}
	var peers []string
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		peers = append(peers, id+"="+nw.nodeAddr(i, "raft"))
		c.nodes = append(c.nodes, &node{i: i, id: id, url: "http://" + nw.nodeAddr(i, "http"),
			data: filepath.Join(dir, id),
			proc: proc{name: id, bin: bin, netns: nw.nodeNetns(i), log: filepath.Join(dir, id+".log")}})
	}
	c.peers = strings.Join(peers, ",")
	for i := range workers {
		name := fmt.Sprintf("r%d", i+1)
		c.workers = append(c.workers, &proc{name: name, bin: bin, netns: nw.workerNetns(i), log: filepath.Join(dir, name+".log")})
	}
	return c
}

func (c *cluster) urls() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.url
	}
	return out
}

// nodeArgs are node n's server flags, with its current test hooks.
func (c *cluster) nodeArgs(n *node) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	args := []string{"server", "--id", n.id, "--http", c.net.nodeAddr(n.i, "http"),
		"--raft", c.net.nodeAddr(n.i, "raft"), "--data", n.data, "--peers", c.peers,
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
	if err := n.start(c.nodeArgs(n)); err != nil {
		return err
	}
	return c.waitServing(ctx, n, 20*time.Second)
}

// restartNode stops n (SIGKILL) and starts it again with its current hooks.
func (c *cluster) restartNode(ctx context.Context, n *node) error {
	n.kill()
	return c.startNode(ctx, n)
}

func (c *cluster) waitServing(ctx context.Context, n *node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exited := n.exited()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/health", nil)
		if resp, err := c.hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start:\n%s", n.id, n.tail(20))
		case <-ctx.Done():
			return fmt.Errorf("%s does not answer HTTP on %s after %s", n.id, n.url, timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startWorker starts real worker i.
func (c *cluster) startWorker(i int) error {
	w := c.workers[i]
	return w.start([]string{"worker", "--server", strings.Join(c.urls(), ","), "--id", w.name,
		"--concurrency", "3", "--queues", cronQueue + "," + chaosQueue, "--poll-wait", "2s", "--grace", "1s",
		"--kill-grace", "200ms", "--log-level", "warn"})
}

// getJSON fetches url into out and returns the status.
func (c *cluster) getJSON(ctx context.Context, url string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", url, err)
		}
	}
	return resp.StatusCode, nil
}

// leader returns the node every running, unpaused node names as leader, or
// nil if they do not agree right now.
func (c *cluster) leader(ctx context.Context) *node {
	var found *node
	leaders := make(map[string]bool)
	for _, n := range c.nodes {
		if !n.running() || n.isPaused() {
			continue
		}
		var h wire.Health
		status, err := c.getJSON(ctx, n.url+"/health", &h)
		if err != nil || status != http.StatusOK {
			return nil
		}
		leaders[h.Leader] = true
		if h.Role == "leader" && h.NodeID == h.Leader {
			found = n
		}
	}
	if len(leaders) != 1 || found == nil || !leaders[found.id] {
		return nil
	}
	return found
}

// waitLeader polls until the cluster agrees on a leader.
func (c *cluster) waitLeader(ctx context.Context, timeout time.Duration) (*node, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if l := c.leader(ctx); l != nil {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no leader agreed on by every running node after %s", timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopAll kills every process.
func (c *cluster) stopAll() {
	for _, w := range c.workers {
		w.kill()
	}
	for _, n := range c.nodes {
		n.kill()
	}
}
