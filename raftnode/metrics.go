package raftnode

import (
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
)

// This file keeps the node's figures for metrics: histograms of what the
// proposer does and the facts of the latest snapshot. It imports no metrics
// library; package api turns Stats into Prometheus series.

// Upper bounds of the node's histograms.
var (
	// applyBounds are seconds from raft.Apply to the entry's results.
	applyBounds = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}
	// entryBounds are commands packed into one entry.
	entryBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536}
)

// Histogram counts observations into fixed buckets. It is safe for
// concurrent use; build it with newHistogram.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // counts[i]: observations <= bounds[i] and > bounds[i-1]; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

func newHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
}

// snapshot reads the histogram; nil reads as empty.
func (h *Histogram) snapshot() HistogramSnapshot {
	if h == nil {
		return HistogramSnapshot{}
	}
	s := HistogramSnapshot{Buckets: make([]Bucket, len(h.bounds))}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		s.Buckets[i] = Bucket{UpperBound: b, Count: cum}
	}
	s.Count = cum + h.counts[len(h.bounds)].Load()
	s.Sum = math.Float64frombits(h.sum.Load())
	return s
}

// HistogramSnapshot is a histogram read at one moment, in the shape of a
// Prometheus histogram: Buckets hold cumulative counts by upper bound, and
// Count includes observations above the last bound.
type HistogramSnapshot struct {
	Count   uint64
	Sum     float64
	Buckets []Bucket
}

// Bucket is one cumulative bucket of a HistogramSnapshot.
type Bucket struct {
	UpperBound float64
	Count      uint64
}

// SnapshotStats describe the latest Raft snapshot this node holds.
type SnapshotStats struct {
	// Index is the last log index the snapshot covers; 0 if there is none.
	Index uint64
	// Bytes is the snapshot's size.
	Bytes int64
	// Duration is how long this process took to capture and write it; 0
	// if the snapshot was taken before the process started.
	Duration time.Duration
	// Taken is when this process finished writing it; zero if before.
	Taken time.Time
	// Count is how many snapshots this process has taken, Written the
	// bytes they wrote together.
	Count   uint64
	Written int64
}

// snapshotRecorder keeps SnapshotStats. Its zero value is ready.
type snapshotRecorder struct {
	mu   sync.Mutex
	last SnapshotStats
}

// load starts from the newest snapshot on disk; call it before Raft starts.
func (r *snapshotRecorder) load(snaps raft.SnapshotStore) {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last.Index, r.last.Bytes = metas[0].Index, metas[0].Size
}

func (r *snapshotRecorder) record(index uint64, bytes int64, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = SnapshotStats{Index: index, Bytes: bytes, Duration: d, Taken: time.Now(), Count: r.last.Count + 1, Written: r.last.Written + bytes}
}

func (r *snapshotRecorder) stats() SnapshotStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// timedFSM is the state machine as Raft sees it: the FSM, with snapshots
// timed and measured, and applies timed (tracer). Backups (WriteBackup) bypass it and are not counted.
type timedFSM struct {
	*fsm.FSM
	rec    *snapshotRecorder
	stages *tracer
	meter  *logMeter
	// writeRate paces snapshot writes (Config.SnapshotWriteRate) until stop
	// closes.
	writeRate int64
	stop      <-chan struct{}
	// restored records the index of each snapshot the FSM restores.
	restored *restoredIndex
	// restore restores a snapshot from the node's snapshot store
	// (Node.restoreChecked).
	restore func(io.ReadCloser) error
}

// Restore replaces the state with a snapshot's (one a leader sent, or a
// backup restored through Raft) and records the snapshot's index: the
// state stands at it, though the FSM's own applied index may be lower (see
// Node.AppliedIndex).
func (t *timedFSM) Restore(rc io.ReadCloser) error {
	if err := t.restore(rc); err != nil {
		return err
	}
	t.restored.newest()
	return nil
}

// ApplyBatch applies logs, timed for the stage histograms.
func (t *timedFSM) ApplyBatch(logs []*raft.Log) []any {
	start := time.Now()
	out := t.FSM.ApplyBatch(logs)
	t.stages.applied(logs, start, time.Now())
	t.meter.add(logs)
	return out
}

// Snapshot captures the state; Raft calls it from its FSM goroutine, so the
// applied index is the snapshot's.
func (t *timedFSM) Snapshot() (raft.FSMSnapshot, error) {
	start := time.Now()
	index := t.FSM.Applied()
	sn, err := t.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return &timedSnapshot{FSMSnapshot: sn, start: start, index: index, rec: t.rec, writeRate: t.writeRate, stop: t.stop}, nil
}

type timedSnapshot struct {
	raft.FSMSnapshot
	start     time.Time
	index     uint64
	rec       *snapshotRecorder
	writeRate int64
	stop      <-chan struct{}
}

func (s *timedSnapshot) Persist(sink raft.SnapshotSink) error {
	if s.writeRate > 0 {
		sink = newPacedSink(sink, s.writeRate, s.stop)
	}
	cs := &countingSink{SnapshotSink: sink}
	if err := s.FSMSnapshot.Persist(cs); err != nil {
		return err
	}
	s.rec.record(s.index, cs.n, time.Since(s.start))
	return nil
}

// countingSink counts the bytes written through it.
type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	k, err := c.SnapshotSink.Write(p)
	c.n += int64(k)
	return k, err
}
