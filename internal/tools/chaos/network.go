//go:build unix

package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/workron/workron/internal/testkit/ports"
)

// errNoNetworkFaults means the network cannot cut links: the harness runs
// without root, or was told not to use namespaces.
var errNoNetworkFaults = errors.New("chaos: network faults need network namespaces (run as root, with iproute2)")

// network places processes and cuts links between them.
type network interface {
	// nodeHost is the host (IP) node i listens on; port the port it uses
	// for kind "http" or "raft".
	nodeAddr(i int, kind string) string
	// nodeNetns and workerNetns name the namespace to start a process in
	// ("" for the harness's own).
	nodeNetns(i int) string
	workerNetns(i int) string
	// block cuts traffic from namespace endpoint a to b and back; heal
	// restores every link.
	block(a, b endpoint) error
	heal() error
	// close removes whatever the network created.
	close() error
	describe() string
}

// endpoint names a node or a real worker.
type endpoint struct {
	worker bool
	i      int
}

func nodeEP(i int) endpoint   { return endpoint{i: i} }
func workerEP(i int) endpoint { return endpoint{worker: true, i: i} }

// loopNet runs everything on 127.0.0.1 with free ports: no network faults.
type loopNet struct {
	ports []int // http then raft, per node
}

func newLoopNet(nodes int) (*loopNet, error) {
	ports, err := ports.Free(2 * nodes)
	if err != nil {
		return nil, err
	}
	return &loopNet{ports: ports}, nil
}

func (l *loopNet) nodeAddr(i int, kind string) string {
	p := l.ports[2*i]
	if kind == "raft" {
		p = l.ports[2*i+1]
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}
func (l *loopNet) nodeNetns(int) string           { return "" }
func (l *loopNet) workerNetns(int) string         { return "" }
func (l *loopNet) block(endpoint, endpoint) error { return errNoNetworkFaults }
func (l *loopNet) heal() error                    { return nil }
func (l *loopNet) close() error                   { return nil }
func (l *loopNet) describe() string {
	return "loopback (127.0.0.1, free ports): no partitions and no real-worker network loss"
}

// nsNet gives every node and real worker its own network namespace with a
// veth pair into one bridge in the harness's namespace, on a private /24 that
// exists only inside this machine. A cut between two namespaces is a pair of
// blackhole routes, one in each: packets (new connections and established
// ones alike) are dropped, while both keep talking to everyone else,
// including the harness's clients.
type nsNet struct {
	prefix string // "wkc" + run id: names of namespaces, links, bridge
	subnet string // "10.213.N."
	nodes  int
	wks    int

	mu      sync.Mutex
	blocked map[[2]string]bool // (namespace, destination IP)
}

const nsNamePrefix = "wkc"

// canUseNetns reports whether this process may create namespaces.
func canUseNetns() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root (uid %d)", errNoNetworkFaults, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: no ip command (apt-get install iproute2)", errNoNetworkFaults)
	}
	return nil
}

func newNsNet(nodes, workers int) (*nsNet, error) {
	if err := canUseNetns(); err != nil {
		return nil, err
	}
	cleanStaleNamespaces()
	id := os.Getpid()
	n := &nsNet{
		prefix:  nsNamePrefix + strconv.Itoa(id),
		subnet:  freeSubnet(id),
		nodes:   nodes,
		wks:     workers,
		blocked: make(map[[2]string]bool),
	}
	if err := n.setup(); err != nil {
		_ = n.close()
		return nil, err
	}
	return n, nil
}

// freeSubnet picks a 10.213.N.0/24 that no interface here uses (another
// run's bridge), starting from one derived from the run id.
func freeSubnet(id int) string {
	out, _ := exec.Command("ip", "-4", "-o", "addr").Output()
	for k := range 200 {
		s := fmt.Sprintf("10.213.%d.", 20+(id+k)%200)
		if !strings.Contains(string(out), " "+s) {
			return s
		}
	}
	return fmt.Sprintf("10.213.%d.", 20+id%200)
}

func (n *nsNet) bridge() string { return n.prefix + "br" }
func (n *nsNet) nodeNetns(i int) string {
	return fmt.Sprintf("%sn%d", n.prefix, i+1)
}
func (n *nsNet) workerNetns(i int) string {
	return fmt.Sprintf("%sw%d", n.prefix, i+1)
}
func (n *nsNet) ip(ep endpoint) string {
	if ep.worker {
		return n.subnet + strconv.Itoa(100+ep.i)
	}
	return n.subnet + strconv.Itoa(10+ep.i)
}
func (n *nsNet) ns(ep endpoint) string {
	if ep.worker {
		return n.workerNetns(ep.i)
	}
	return n.nodeNetns(ep.i)
}

func (n *nsNet) nodeAddr(i int, kind string) string {
	port := "7001"
	if kind == "raft" {
		port = "8001"
	}
	return net.JoinHostPort(n.ip(nodeEP(i)), port)
}

func (n *nsNet) describe() string {
	return fmt.Sprintf("network namespaces %s* on bridge %s, subnet %s0/24", n.prefix, n.bridge(), n.subnet)
}

func (n *nsNet) setup() error {
	br := n.bridge()
	steps := [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", n.subnet + "1/24", "dev", br},
		{"link", "set", br, "up"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return err
		}
	}
	var eps []endpoint
	for i := range n.nodes {
		eps = append(eps, nodeEP(i))
	}
	for i := range n.wks {
		eps = append(eps, workerEP(i))
	}
	for _, ep := range eps {
		ns := n.ns(ep)
		host := ns // the host side of the veth is named like the namespace
		for _, s := range [][]string{
			{"netns", "add", ns},
			{"link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"link", "set", host, "master", br, "up"},
			{"-n", ns, "addr", "add", n.ip(ep) + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if err := ipCmd(s...); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *nsNet) block(a, b endpoint) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, pair := range [][2]endpoint{{a, b}, {b, a}} {
		key := [2]string{n.ns(pair[0]), n.ip(pair[1])}
		if n.blocked[key] {
			continue
		}
		if err := ipCmd("-n", key[0], "route", "add", "blackhole", key[1]+"/32"); err != nil {
			return err
		}
		n.blocked[key] = true
	}
	return nil
}

func (n *nsNet) heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for key := range n.blocked {
		if err := ipCmd("-n", key[0], "route", "del", "blackhole", key[1]+"/32"); err != nil {
			errs = append(errs, err)
		}
		delete(n.blocked, key)
	}
	return errors.Join(errs...)
}

func (n *nsNet) close() error {
	var errs []error
	for i := range n.nodes {
		errs = append(errs, delNetns(n.nodeNetns(i)))
	}
	for i := range n.wks {
		errs = append(errs, delNetns(n.workerNetns(i)))
	}
	if linkExists(n.bridge()) {
		errs = append(errs, ipCmd("link", "del", n.bridge()))
	}
	return errors.Join(errs...)
}

func delNetns(ns string) error {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == ns {
			return ipCmd("netns", "del", ns)
		}
	}
	return nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", name).Run() == nil
}

// cleanStaleNamespaces removes the namespaces and bridges of earlier runs
// whose harness process is gone (a run that was killed).
func cleanStaleNamespaces() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	stale := make(map[string]bool)
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsNamePrefix) {
			continue
		}
		rest := strings.TrimPrefix(f[0], nsNamePrefix)
		end := strings.IndexAny(rest, "nw")
		if end <= 0 {
			continue
		}
		pid, err := strconv.Atoi(rest[:end])
		if err != nil || pidAlive(pid) {
			continue
		}
		_ = ipCmd("netns", "del", f[0])
		stale[nsNamePrefix+rest[:end]+"br"] = true
	}
	for br := range stale {
		if linkExists(br) {
			_ = ipCmd("link", "del", br)
		}
	}
}

func pidAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
