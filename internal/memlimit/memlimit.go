// Package memlimit sets the Go runtime's soft memory limit of a Workron
// node process (debug.SetMemoryLimit, what GOMEMLIMIT sets): a size, a
// share of the memory the process may use (its cgroup's limit, else the
// machine's), or none. Near the limit the collector runs as often as it
// must to stay under it, so a burst of requests makes the node collect
// more often rather than grow until the kernel kills it.
//
// The package owns that one setting. It never overrides GOMEMLIMIT given
// in the environment (the operator's choice), and only the first Apply in
// a process counts: the setting is the process's, and `workron bench`
// starts several nodes in one.
package memlimit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// Default is the limit a node takes unless told otherwise: 80% of the
// memory the process may use.
const Default = "80%"

// MinBytes is the least limit a size may give: below it the collector
// would run all the time over a node's own live heap.
const MinBytes = 64 << 20

// Limit is a parsed --memory-limit: one of Bytes, Percent or Off.
type Limit struct {
	Bytes   int64   // a size
	Percent float64 // a share of Available, from 0 (excluded) to 100
	Off     bool    // no limit
}

// ErrInvalid is wrapped by every error of Parse.
var ErrInvalid = errors.New("memlimit: invalid limit")

// units are the suffixes of a size, as GOMEMLIMIT spells them, and the
// decimal and one-letter ones people also write.
var units = []struct {
	suffix string
	scale  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// Parse reads a limit: "off"; a percentage of the memory the process may
// use ("80%", more than 0 and at most 100); or a size in bytes with an
// optional unit ("4GiB", "512MiB", "2G", "1500000000"), at least
// MinBytes.
func Parse(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Limit{}, fmt.Errorf("%w: empty (give a size like 4GiB, a share like 80%%, or off)", ErrInvalid)
	case strings.EqualFold(s, "off") || strings.EqualFold(s, "none"):
		return Limit{Off: true}, nil
	case strings.HasSuffix(s, "%"):
		p, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
		if err != nil || math.IsNaN(p) || p <= 0 || p > 100 {
			return Limit{}, fmt.Errorf("%w: %q is not a share of memory from 0%% (excluded) to 100%%", ErrInvalid, s)
		}
		return Limit{Percent: p}, nil
	}
	num, scale := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, scale = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.scale
			break
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	switch {
	case err != nil || math.IsNaN(n) || math.IsInf(n, 0):
		return Limit{}, fmt.Errorf("%w: %q is not a size like 4GiB, a share like 80%%, or off", ErrInvalid, s)
	case n < 0:
		return Limit{}, fmt.Errorf("%w: %q is negative", ErrInvalid, s)
	case n*float64(scale) >= math.MaxInt64:
		return Limit{}, fmt.Errorf("%w: %q is too large (give off for no limit)", ErrInvalid, s)
	case n*float64(scale) < MinBytes:
		return Limit{}, fmt.Errorf("%w: %q is below %d MiB, too little for a node", ErrInvalid, s, MinBytes>>20)
	}
	return Limit{Bytes: int64(n * float64(scale))}, nil
}

// bytes is the limit in bytes given the memory available (0: unknown); 0
// when there is none: off, or a share of unknown memory.
func (l Limit) bytes(available uint64) int64 {
	switch {
	case l.Off:
		return 0
	case l.Percent > 0:
		return int64(float64(available) * l.Percent / 100)
	}
	return l.Bytes
}

var once sync.Once

// Apply sets this process's memory limit to l and returns the limit in
// force (math.MaxInt64: none) and where it came from: "GOMEMLIMIT" when
// the environment sets it (l is then ignored), else "--memory-limit"
// with, for a share, the memory it is a share of. Only the first call in
// a process sets anything; later ones report what is in force.
func Apply(l Limit) (limit int64, from string) {
	from = "GOMEMLIMIT"
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), from
	}
	avail, of := Available(os.ReadFile)
	from = "--memory-limit"
	switch {
	case l.Percent > 0 && avail == 0:
		from = "--memory-limit: a share of memory this system does not tell, so none"
	case l.Percent > 0:
		from = fmt.Sprintf("--memory-limit %g%% of %s (%d MiB)", l.Percent, of, avail>>20)
	}
	once.Do(func() {
		if b := l.bytes(avail); b > 0 {
			debug.SetMemoryLimit(b)
		} else {
			debug.SetMemoryLimit(math.MaxInt64)
		}
	})
	return debug.SetMemoryLimit(-1), from
}

// noLimit is what cgroup v1 shows for no limit (and more is none too).
const noLimit = 1 << 62

// Available is the memory this process may use, and what it is: the
// lowest limit of its cgroup and the cgroups above it (v2 memory.max, v1
// memory.limit_in_bytes) when there is one, else the machine's memory
// (MemTotal in /proc/meminfo); 0 when neither can be read (not Linux).
// readFile reads a file (os.ReadFile; tests give their own).
func Available(readFile func(string) ([]byte, error)) (uint64, string) {
	machine := meminfoTotal(readFile)
	if c := cgroupLimit(readFile); c > 0 && (machine == 0 || c < machine) {
		return c, "the cgroup's limit"
	}
	return machine, "the machine's memory"
}

// meminfoTotal reads MemTotal from /proc/meminfo, in bytes; 0 if it cannot.
func meminfoTotal(readFile func(string) ([]byte, error)) uint64 {
	b, err := readFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupLimit is the lowest memory limit of the process's cgroup and
// those above it; 0 when none is set or none can be read.
func cgroupLimit(readFile func(string) ([]byte, error)) uint64 {
	b, err := readFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	var lowest uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var root, file string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			root, file = "/sys/fs/cgroup", "memory.max"
		case hasController(parts[1], "memory"): // v1
			root, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		// The process's own cgroup and each above it, up to the root
		// (inside a container, the root is the container's own).
		for dir := strings.TrimSuffix(parts[2], "/"); ; dir = dir[:strings.LastIndex(dir, "/")] {
			if n := readLimit(readFile, root+dir+"/"+file); n > 0 && (lowest == 0 || n < lowest) {
				lowest = n
			}
			if !strings.Contains(dir, "/") {
				break
			}
		}
	}
	return lowest
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a cgroup limit file: 0 for none ("max", absent, or
// cgroup v1's huge number).
func readLimit(readFile func(string) ([]byte, error), path string) uint64 {
	b, err := readFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n >= noLimit {
		return 0
	}
	return n
}
