//go:build unix

// Package proccluster runs real workron processes for the end-to-end tests,
// the bench's process scenarios and the chaos harness: Proc starts, signals,
// pauses, restarts and stops one process and keeps its log; Cluster starts N
// `workron server` processes of a given binary on free 127.0.0.1 ports, a
// data directory each, formed with --peers, and finds their leader. It
// never decides whether a run was correct (see internal/tools/jobcheck).
package proccluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/testkit/ports"
)

// ErrPortTaken is returned when a server exited at start because another
// process took one of its ports between the pick and the bind.
var ErrPortTaken = errors.New("proccluster: port taken")

// startTries is how often Start picks new ports after ErrPortTaken.
const startTries = 3

// Config says what cluster Start runs.
type Config struct {
	// Bin is the workron binary. Required.
	Bin string
	// Dir holds each node's log (ID.log) and data directory. Required.
	Dir string
	// Nodes is how many servers run. Defaults to 3.
	Nodes int
	// Args are more `workron server` flags for every node (timeouts, log
	// level), after --id, --http, --raft, --data and --peers.
	Args []string
	// HTTP is the client that asks the nodes. Defaults to one with a 10s
	// timeout.
	HTTP *http.Client
}

// Node is one server process.
type Node struct {
	Proc        // Name is the node's Raft id
	URL  string // http://127.0.0.1:PORT
	Data string // its data directory
}

// Cluster is the server processes Start started.
type Cluster struct {
	Nodes []*Node
	HTTP  *http.Client
	cfg   Config
}

// Start starts the servers on free ports and waits until each answers
// HTTP. When another process takes a port between the pick and the bind,
// it starts over on other ports (up to three times, each in a fresh data
// directory). On failure every process it started is stopped.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Bin == "" || cfg.Dir == "" {
		return nil, errors.New("proccluster: Config.Bin and Config.Dir are required")
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	c := &Cluster{HTTP: cfg.HTTP, cfg: cfg}
	for try := 1; ; try++ {
		err := c.tryStart(ctx, try)
		if err == nil {
			return c, nil
		}
		c.Stop(0)
		if !errors.Is(err, ErrPortTaken) || try == startTries {
			return nil, fmt.Errorf("start %d servers: %w", cfg.Nodes, err)
		}
	}
}

func (c *Cluster) tryStart(ctx context.Context, try int) error {
	n := c.cfg.Nodes
	ps, err := ports.Free(2 * n)
	if err != nil {
		return err
	}
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, ps[n+i]))
	}
	data := c.cfg.Dir
	if try > 1 {
		data = filepath.Join(data, "try"+strconv.Itoa(try))
	}
	c.Nodes = nil
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ps[i])
		nd := &Node{URL: "http://" + httpAddr, Data: filepath.Join(data, id)}
		nd.Proc = Proc{Name: id, Bin: c.cfg.Bin, Log: filepath.Join(c.cfg.Dir, id+".log"),
			Args: append([]string{"server", "--id", id, "--http", httpAddr,
				"--raft", fmt.Sprintf("127.0.0.1:%d", ps[n+i]), "--data", nd.Data,
				"--peers", strings.Join(peers, ",")}, c.cfg.Args...)}
		c.Nodes = append(c.Nodes, nd)
	}
	offsets := make([]int64, n)
	for i, nd := range c.Nodes {
		if offsets[i], err = nd.Start(); err != nil {
			return err
		}
	}
	for i, nd := range c.Nodes {
		if err := c.WaitServing(ctx, nd, offsets[i], 15*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// URLs are the nodes' base URLs.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL
	}
	return out
}

// WaitServing waits until n answers HTTP (so both its listeners are bound).
// It returns an error wrapping ErrPortTaken if the process exited because a
// port was in use, and one quoting what the run logged after logOffset if
// it exited otherwise.
func (c *Cluster) WaitServing(ctx context.Context, n *Node, logOffset int64, timeout time.Duration) error {
	exited := n.Exited()
	err := poll.Until(ctx, timeout, 20*time.Millisecond, func() error {
		select {
		case <-exited:
			return errExited
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	})
	select {
	case <-exited:
		out := n.LogSince(logOffset)
		if strings.Contains(out, "address already in use") {
			return fmt.Errorf("%s: %w", n.Name, ErrPortTaken)
		}
		return fmt.Errorf("%s exited at start:\n%s", n.Name, out)
	default:
	}
	if err != nil {
		return fmt.Errorf("%s does not answer HTTP on %s after %s: %w", n.Name, n.URL, timeout, err)
	}
	return nil
}

var errExited = errors.New("exited")

// Restart starts a stopped node again with its flags and data, and waits
// until it answers HTTP, trying again for up to 20s while another process
// holds one of its ports.
func (c *Cluster) Restart(ctx context.Context, n *Node) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		off, err := n.Start()
		if err != nil {
			return err
		}
		err = c.WaitServing(ctx, n, off, time.Until(deadline))
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrPortTaken) || time.Now().After(deadline) {
			return fmt.Errorf("restart %s: %w", n.Name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Leader is the node every running, unpaused node names as leader, which
// says it leads, and its health; an error says what the nodes answered
// when they do not agree right now.
func (c *Cluster) Leader(ctx context.Context) (*Node, wire.Health, error) {
	var (
		found *Node
		fh    wire.Health
		seen  []string
	)
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		var h wire.Health
		status, _, err := c.Get(ctx, n.URL+"/health", &h)
		if err != nil || status != http.StatusOK {
			return nil, fh, fmt.Errorf("%s: status %d, err %v", n.Name, status, err)
		}
		seen = append(seen, h.Leader)
		if h.Role == "leader" && h.NodeID == h.Leader {
			found, fh = n, h
		}
	}
	if found == nil || slices.ContainsFunc(seen, func(l string) bool { return l != found.Name }) {
		return nil, fh, fmt.Errorf("leaders seen: %v", seen)
	}
	return found, fh, nil
}

// WaitLeader polls Leader every 20ms until the running nodes agree.
func (c *Cluster) WaitLeader(ctx context.Context, timeout time.Duration) (*Node, error) {
	var found *Node
	err := poll.Until(ctx, timeout, 20*time.Millisecond, func() (err error) {
		found, _, err = c.Leader(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("no leader agreed on by every running node after %s: %w", timeout, err)
	}
	return found, nil
}

// WaitFormed waits until every node runs, they agree on a leader, and the
// leader's GET /cluster lists every node with its HTTP address. It gives up
// at once, with the log's tail, when a node exits.
func (c *Cluster) WaitFormed(ctx context.Context, timeout time.Duration) error {
	var dead *Node
	err := poll.Until(ctx, timeout, 50*time.Millisecond, func() error {
		for _, n := range c.Nodes {
			if !n.Running() {
				dead = n
				return nil
			}
		}
		l, _, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		var cl wire.Cluster
		if _, _, err := c.Get(ctx, l.URL+"/cluster", &cl); err != nil {
			return err
		}
		if len(cl.Nodes) != len(c.Nodes) {
			return fmt.Errorf("the leader lists %d of %d nodes", len(cl.Nodes), len(c.Nodes))
		}
		for _, m := range cl.Nodes {
			if m.HTTP == "" {
				return fmt.Errorf("the leader knows no HTTP address of %s", m.ID)
			}
		}
		return nil
	})
	switch {
	case dead != nil:
		return fmt.Errorf("node %s exited:\n%s", dead.Name, dead.Tail(20))
	case err != nil:
		return fmt.Errorf("wait for the server processes to agree on a leader: %w", err)
	}
	return nil
}

// Get fetches url into out (when not nil and the reply is 2xx) and returns
// the status and the body.
func (c *Cluster) Get(ctx context.Context, url string, out any) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, body, fmt.Errorf("decode %s: %w", url, err)
		}
	}
	return resp.StatusCode, body, nil
}

// Stop stops every node at once: SIGTERM, then SIGKILL after grace (at
// once when grace is 0). It leaves Dir alone.
func (c *Cluster) Stop(grace time.Duration) {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() { n.Stop(grace) })
	}
	wg.Wait()
}

// Logs are the last n lines of every node's log, for a failure report.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, nd := range c.Nodes {
		fmt.Fprintf(&b, "--- last lines of %s (%s) ---\n%s\n", nd.Name, nd.Log, nd.Tail(n))
	}
	return b.String()
}
