package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/proccluster"
)

// binary is the workron binary the process scenarios run: --bin, or the
// running executable (the bench runs inside the workron binary).
func (c *Config) binary() (string, error) {
	if c.Bin != "" {
		return c.Bin, nil
	}
	bin, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the workron binary (give --bin): %w", err)
	}
	return bin, nil
}

// procCluster is three `workron server` processes (internal/testkit/proccluster) on
// 127.0.0.1, formed with --peers, each with the server's default storage
// settings (Raft log fsync'd) and ProcRaftTimeout. A killed node restarts at
// the same addresses.
type procCluster struct {
	*proccluster.Cluster
	dir string
}

// startProcCluster starts the three processes in a new temporary directory
// and waits until they agree on a leader that knows every member's address.
func (b *bencher) startProcCluster(ctx context.Context, name string) (*procCluster, error) {
	return b.startProcNodes(ctx, name, 3)
}

// startProcNodes is startProcCluster with n processes.
func (b *bencher) startProcNodes(ctx context.Context, name string, n int) (*procCluster, error) {
	bin, err := b.cfg.binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "workron-bench-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("bench data dir: %w", err)
	}
	pc, err := proccluster.Start(ctx, proccluster.Config{Bin: bin, Dir: dir, HTTP: b.hc, Nodes: n, Args: b.procNodeArgs()})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &procCluster{Cluster: pc, dir: dir}
	if err := c.WaitFormed(ctx, 60*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// procNodeArgs are the flags every server process gets after its
// addresses, data directory and peers.
func (b *bencher) procNodeArgs() []string {
	timeout := b.cfg.ProcRaftTimeout.String()
	return append([]string{"--raft-heartbeat-timeout", timeout, "--raft-election-timeout", timeout, "--log-level", "warn"}, b.cfg.NodeArgs...)
}

// leader is the index of the node that says it leads, and its health.
func (c *procCluster) leader(ctx context.Context, b *bencher) (int, wire.Health, error) {
	for i, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		var h wire.Health
		if st, err := b.call(ctx, http.MethodGet, n.URL+"/health", nil, &h); err == nil && st == http.StatusOK && h.Role == "leader" {
			return i, h, nil
		}
	}
	return -1, wire.Health{}, errors.New("no server process says it leads")
}

// stop stops every node (SIGTERM, then SIGKILL after 10s) and removes the
// data directory.
func (c *procCluster) stop() {
	c.Stop(10 * time.Second)
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
