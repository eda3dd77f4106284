package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
)

// procBenchFlags are the flags of the scenarios that run real workron
// processes: real_workers, failover and large_store.
type procBenchFlags struct {
	bin            string
	realJobs       int
	failoverRounds int
	raftTimeout    time.Duration
	largeJobs      int
	largePending   int
}

func (f *procBenchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.bin, "bin", "", "workron binary to run as server and worker processes (default: this executable)")
	fs.IntVar(&f.realJobs, "real-jobs", 5000, "jobs of real_workers (--short: 200)")
	fs.IntVar(&f.failoverRounds, "failover-rounds", 5, "leader kills of failover (--short: 1)")
	fs.DurationVar(&f.raftTimeout, "proc-raft-timeout", 500*time.Millisecond, "Raft heartbeat and election timeout of the server processes failover and large_store start")
	fs.IntVar(&f.largeJobs, "large-jobs", 1_000_000, "finished jobs large_store retains (--short: 2000)")
	fs.IntVar(&f.largePending, "large-pending", 100_000, "pending jobs large_store holds besides (--short: 200)")
}

// validate applies --short's defaults to the flags not set and names the
// first one out of bounds.
func (f *procBenchFlags) validate(short bool, set map[string]bool) error {
	if short {
		def := func(name string, p *int, v int) {
			if !set[name] {
				*p = v
			}
		}
		def("real-jobs", &f.realJobs, 200)
		def("failover-rounds", &f.failoverRounds, 1)
		def("large-jobs", &f.largeJobs, 2000)
		def("large-pending", &f.largePending, 200)
	}
	switch {
	case f.realJobs < 1:
		return fmt.Errorf("--real-jobs must be at least 1, got %d", f.realJobs)
	case f.failoverRounds < 1:
		return fmt.Errorf("--failover-rounds must be at least 1, got %d", f.failoverRounds)
	case f.raftTimeout < 10*time.Millisecond:
		return fmt.Errorf("--proc-raft-timeout must be at least 10ms, got %s", f.raftTimeout)
	case f.largeJobs < 0:
		return fmt.Errorf("--large-jobs must not be negative, got %d", f.largeJobs)
	case f.largePending < 0:
		return fmt.Errorf("--large-pending must not be negative, got %d", f.largePending)
	}
	return nil
}

// binary is the workron binary the process scenarios run: --bin, or the
// running executable (the bench runs inside the workron binary).
func (f *procBenchFlags) binary() (string, error) {
	if f.bin != "" {
		return f.bin, nil
	}
	bin, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the workron binary (give --bin): %w", err)
	}
	return bin, nil
}

// benchProc is one child process of the bench, a workron server or worker,
// with its output appended to a log file. Its methods are not safe for
// concurrent use, except exited and pid.
type benchProc struct {
	name string
	bin  string
	args []string
	log  string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
}

// start starts the process; a process already running is left alone.
func (p *benchProc) start() error {
	if p.cmd != nil && !p.exited() {
		return nil
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log of %s: %w", p.name, err)
	}
	defer f.Close() // the child holds its own copy
	fmt.Fprintf(f, "=== %s: bench starts %s %s\n", time.Now().Format(time.StampMilli), p.name, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

// exited reports whether the process has ended (true if never started).
func (p *benchProc) exited() bool {
	if p.done == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *benchProc) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill sends SIGKILL and waits for the exit.
func (p *benchProc) kill() { p.stop(0) }

// stop sends SIGTERM and waits up to grace for the exit, then SIGKILL
// (at once when grace is 0).
func (p *benchProc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	if grace > 0 {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// tail is the last n lines of the process's log.
func (p *benchProc) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// procCluster is three `workron server` processes on 127.0.0.1 with fixed
// ports (so a killed node restarts at the same addresses), formed with
// --peers, each with the server's default storage settings (Raft log
// fsync'd) and --proc-raft-timeout.
type procCluster struct {
	dir   string
	nodes []*procNode
}

type procNode struct {
	benchProc
	id, url, data string
}

// startProcCluster starts the three processes in a new temporary directory
// and waits until they agree on a leader that knows every member's address.
func (b *bencher) startProcCluster(ctx context.Context, name string) (*procCluster, error) {
	bin, err := b.f.procs.binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "workron-bench-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("bench data dir: %w", err)
	}
	c := &procCluster{dir: dir}
	ports, err := benchFreePorts(6)
	if err != nil {
		c.stop()
		return nil, err
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, ports[2*i+1]))
	}
	timeout := b.f.procs.raftTimeout.String()
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		n := &procNode{id: id, url: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]), data: filepath.Join(dir, id)}
		n.benchProc = benchProc{name: name + "-" + id, bin: bin, log: filepath.Join(dir, id+".log"),
			args: append([]string{"server", "--id", id, "--http", fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
				"--raft", fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), "--data", n.data, "--peers", strings.Join(peers, ","),
				"--raft-heartbeat-timeout", timeout, "--raft-election-timeout", timeout, "--log-level", "warn"},
				strings.Fields(os.Getenv("WORKRON_BENCH_NODE_ARGS"))...)}
		c.nodes = append(c.nodes, n)
		if err := n.start(); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.waitHealthy(ctx, b, 60*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// benchFreePorts finds n free TCP ports on 127.0.0.1. Another process may take
// one before the bench's children listen on it; the start then fails.
func benchFreePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *procCluster) urls() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.url
	}
	return out
}

// waitHealthy waits until every node runs and they all agree on a leader
// that lists every member with its HTTP address; it gives up early, with
// the log's tail, when a node exits.
func (c *procCluster) waitHealthy(ctx context.Context, b *bencher, timeout time.Duration) error {
	var dead *procNode
	err := waitUntil(ctx, timeout, func() bool {
		for _, n := range c.nodes {
			if n.exited() {
				dead = n
				return true
			}
		}
		return b.healthy(ctx, c.urls())
	})
	switch {
	case dead != nil:
		return fmt.Errorf("node %s exited:\n%s", dead.id, dead.tail(20))
	case err != nil:
		return fmt.Errorf("wait for the server processes to agree on a leader: %w", err)
	}
	return nil
}

// leader is the index of the node that says it leads, and its health.
func (c *procCluster) leader(ctx context.Context, b *bencher) (int, wire.Health, error) {
	for i, n := range c.nodes {
		if n.exited() {
			continue
		}
		var h wire.Health
		if st, err := b.call(ctx, http.MethodGet, n.url+"/health", nil, &h); err == nil && st == http.StatusOK && h.Role == "leader" {
			return i, h, nil
		}
	}
	return -1, wire.Health{}, errors.New("no server process says it leads")
}

// stop stops every node (SIGTERM, then SIGKILL after 10s) and removes the
// data directory.
func (c *procCluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.stop(10 * time.Second) })
	}
	wg.Wait()
	os.RemoveAll(c.dir)
}

// procMem is a process's memory from /proc/PID/status, in bytes (zeros
// where unknown): resident (RSS = Anon + File + Shmem), its peak, and the
// anonymous (heap, stacks) and file-backed (here mostly the mmap'd state
// file) parts.
type procMem struct {
	RSS, HWM, Anon, File int64
}

func readProcMem(pid int) procMem {
	var m procMem
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	for line := range strings.Lines(string(data)) {
		name, val, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			m.RSS = kb << 10
		case "VmHWM":
			m.HWM = kb << 10
		case "RssAnon":
			m.Anon = kb << 10
		case "RssFile":
			m.File = kb << 10
		}
	}
	return m
}

// procCPU is the CPU time a process and its waited-for children have used,
// from /proc/PID/stat (0 where unknown). It assumes 100 clock ticks a
// second, which Linux reports on every common platform.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces; the fields after it do not.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return 0
	}
	var ticks int64
	for _, f := range fields[11:15] { // utime, stime, cutime, cstime
		v, _ := strconv.ParseInt(f, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// dirSize is the total size of the regular files under dir: apparent (as
// ls shows it) and allocated on disk (as du does; the apparent size where
// unknown).
func dirSize(dir string) (apparent, allocated int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		apparent += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		} else {
			allocated += info.Size()
		}
		return nil
	})
	return apparent, allocated, err
}
