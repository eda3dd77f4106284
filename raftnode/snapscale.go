package raftnode

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Snapshots whose cost does not grow with the store (issue #32).
//
// A snapshot copies the whole state file, so with a fixed SnapshotThreshold
// (entries between snapshots) the bytes a snapshot writes per entry grow
// with the store: 565 MB every 8,192 entries at a million jobs. Instead,
// when Config.SnapshotLogRatio is set, the node keeps Raft's threshold at
// the entries whose log bytes add up to that share of the state file:
//
//	threshold = max(SnapshotThreshold, ratio × state bytes / mean entry bytes)
//
// so a snapshot writes at most 1/ratio bytes per byte of log applied since
// the last one, however large the store, and the log between snapshots
// stays under ratio × the state file (plus TrailingLogs entries). A
// restarted node replays nothing more for it (its state file is current);
// a node that joins installs the snapshot and replays at most that share.
// Below minScaledState the fixed threshold holds: a snapshot then costs
// under a second.

// minScaledState is the state file size below which the threshold stays
// SnapshotThreshold.
const minScaledState = 64 << 20

// logMeter counts the command entries the FSM applied and their bytes.
type logMeter struct{ entries, bytes atomic.Uint64 }

func (m *logMeter) add(logs []*raft.Log) {
	var n, b uint64
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			n++
			b += uint64(len(l.Data))
		}
	}
	m.entries.Add(n)
	m.bytes.Add(b)
}

// scaledThreshold is the snapshot threshold for a state file of
// stateBytes whose log entries are entryBytes long on average; a state
// file under minState keeps floor.
func scaledThreshold(floor uint64, ratio float64, stateBytes, minState int64, entryBytes float64) uint64 {
	if ratio <= 0 || entryBytes <= 0 || stateBytes < minState {
		return floor
	}
	n := ratio * float64(stateBytes) / entryBytes
	return max(floor, uint64(min(n, 1<<40)))
}

// snapScaler is scaleSnapshots' memory.
type snapScaler struct {
	minState       int64   // minScaledState; tests lower it
	entries, bytes uint64  // the meter at the last look
	entryBytes     float64 // mean bytes of an entry, 0 before any
	threshold      atomic.Uint64
}

// minMeanEntries is how many new entries a look needs to update the mean.
const minMeanEntries = 64

// scaleSnapshots runs until shutdown: every SnapshotInterval (at least a
// second) it sets Raft's snapshot threshold (scaleOnce).
func (n *Node) scaleSnapshots() {
	defer close(n.scaleDone)
	every := max(n.cfg.SnapshotInterval, time.Second)
	for {
		t := time.NewTimer(every)
		select {
		case <-n.shutdownCh:
			t.Stop()
			return
		case <-t.C:
		}
		n.scaleOnce()
	}
}

// scaleOnce updates the mean entry size from the entries applied since the
// last look and, when the threshold it gives differs from Raft's by more
// than a tenth, reloads Raft's configuration with it.
func (n *Node) scaleOnce() uint64 {
	s := &n.scaler
	e, b := n.meter.entries.Load(), n.meter.bytes.Load()
	if e-s.entries >= minMeanEntries {
		s.entryBytes = float64(b-s.bytes) / float64(e-s.entries)
		s.entries, s.bytes = e, b
	}
	size, err := n.fsm.StoreSize()
	if err != nil {
		return s.threshold.Load()
	}
	want := scaledThreshold(n.cfg.SnapshotThreshold, n.cfg.SnapshotLogRatio, size.CopyBytes, s.minState, s.entryBytes)
	rc := n.raft.ReloadableConfig()
	if have := rc.SnapshotThreshold; want*10 > have*11 || want*11 < have*10 {
		rc.SnapshotThreshold = want
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.logger.Warn("set snapshot threshold", "threshold", want, "err", err)
			return s.threshold.Load()
		}
		n.logger.Info("snapshot threshold", "entries", want, "state_bytes", size.CopyBytes, "mean_entry_bytes", int64(s.entryBytes))
	}
	s.threshold.Store(rc.SnapshotThreshold)
	return rc.SnapshotThreshold
}
