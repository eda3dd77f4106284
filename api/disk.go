package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/raftnode"
)

// Disk space (issue #32): every node watches the disk its data directory
// is on, and warns before it fills: once in its log as free space drops
// under the threshold (and once as it comes back), in the gauge
// workron_disk_low, and in GET /health's "disk". A node whose disk is low
// stays healthy and ready: reads need no disk, and a full disk shows as
// failed writes, which the cluster survives on the other nodes; the
// warning is for the operator, early.

// DiskThreshold is how little free space counts as low: under Percent of
// the disk or under Bytes, whichever is more (a small disk warns at Bytes,
// a large one at Percent). Zero in both never warns.
type DiskThreshold struct {
	Percent float64 // 0 to 100
	Bytes   uint64
}

// DefaultDiskThreshold warns below 10% of the disk or 1 GiB free.
var DefaultDiskThreshold = DiskThreshold{Percent: 10, Bytes: 1 << 30}

// lowBelow is the free space under which a disk of size bytes is low.
func (t DiskThreshold) lowBelow(size uint64) uint64 {
	return max(uint64(float64(size)*t.Percent/100), t.Bytes)
}

// String writes t as ParseDiskThreshold reads it.
func (t DiskThreshold) String() string {
	var parts []string
	if t.Percent > 0 {
		parts = append(parts, strconv.FormatFloat(t.Percent, 'g', -1, 64)+"%")
	}
	if t.Bytes > 0 {
		parts = append(parts, formatBytes(t.Bytes))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ",")
}

// ErrDiskThreshold is wrapped by every error of ParseDiskThreshold.
var ErrDiskThreshold = errors.New("api: invalid disk threshold")

// ParseDiskThreshold reads a threshold: a share of the disk ("10%"), a
// size ("1GiB", "500MB", bytes), both comma-separated ("10%,1GiB"), or
// "0" for none.
func ParseDiskThreshold(s string) (DiskThreshold, error) {
	var t DiskThreshold
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if p, ok := strings.CutSuffix(part, "%"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
				return DiskThreshold{}, fmt.Errorf("%w: %q is not a share from 0%% to 100%%", ErrDiskThreshold, part)
			}
			t.Percent = v
			continue
		}
		b, err := parseBytes(part)
		if err != nil {
			return DiskThreshold{}, fmt.Errorf("%w: %q is not a share like 10%% or a size like 1GiB", ErrDiskThreshold, part)
		}
		t.Bytes = b
	}
	return t, nil
}

// byteUnits are the suffixes parseBytes reads, longest first.
var byteUnits = []struct {
	suffix string
	scale  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func parseBytes(s string) (uint64, error) {
	num, scale := s, 1.0
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, scale = strings.TrimSpace(n), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v*scale >= math.MaxInt64 {
		return 0, errors.New("not a size")
	}
	return uint64(v * scale), nil
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n uint64) string {
	for _, u := range []struct {
		suffix string
		scale  uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.scale && n%u.scale == 0 {
			return strconv.FormatUint(n/u.scale, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}

// diskReading is one look at the data directory and its disk.
type diskReading struct {
	usage      raftnode.DiskUsage
	free, size uint64
	known      bool // the system told free and size
	lowBelow   uint64
	low        bool
}

// readDisk looks at the data directory and its disk now.
func (s *Server) readDisk() diskReading {
	r := diskReading{usage: s.node.DiskUsage()}
	r.free, r.size, r.known = s.diskSpace(r.usage.DataDir)
	if r.known {
		r.lowBelow = s.cfg.DiskLowFree.lowBelow(r.size)
		r.low = r.free < r.lowBelow
	}
	return r
}

// health is r as GET /health shows it.
func (r diskReading) health() *wire.DiskHealth {
	return &wire.DiskHealth{FreeBytes: r.free, SizeBytes: r.size, LowBelowBytes: r.lowBelow, Low: r.low,
		StateBytes: r.usage.StateBytes, StateInUseBytes: r.usage.StateInUseBytes,
		LogBytes: r.usage.LogBytes, SnapshotBytes: r.usage.SnapshotBytes}
}

// checkDisk reads the disk and logs when it becomes low or no longer is:
// once per crossing, however often it is called.
func (s *Server) checkDisk() diskReading {
	r := s.readDisk()
	if !r.known || s.diskLow.Swap(r.low) == r.low {
		return r
	}
	if r.low {
		s.logger.Warn("disk space low: free space on the disk of the data directory is under the threshold (--disk-low-free); free some or add a disk before writes fail",
			"data_dir", r.usage.DataDir, "free_bytes", r.free, "size_bytes", r.size, "low_below_bytes", r.lowBelow,
			"state_bytes", r.usage.StateBytes, "state_in_use_bytes", r.usage.StateInUseBytes,
			"log_bytes", r.usage.LogBytes, "snapshot_bytes", r.usage.SnapshotBytes)
	} else {
		s.logger.Info("disk space no longer low", "data_dir", r.usage.DataDir, "free_bytes", r.free, "low_below_bytes", r.lowBelow)
	}
	return r
}

// WatchDisk runs until ctx ends, on every node: it checks the disk every
// Config.DiskCheckInterval (checkDisk).
func (s *Server) WatchDisk(ctx context.Context) {
	for {
		s.checkDisk()
		t := time.NewTimer(s.cfg.DiskCheckInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
