package raftnode

import (
	"context"
	"testing"
)

func TestScaledThreshold(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name       string
		ratio      float64
		state      int64
		entryBytes float64
		want       uint64
	}{
		{"ASmallStoreKeepsTheFloor", 0.25, 10 * mib, 300, 8192},
		{"NoRatioKeepsTheFloor", 0, 565 * mib, 300, 8192},
		{"NoEntriesSeenKeepTheFloor", 0.25, 565 * mib, 0, 8192},
		{"AMillionJobsRaiseIt", 0.25, 565 * mib, 300, 493_704},
		{"TenTimesTheStoreTenTimesTheEntries", 0.25, 5650 * mib, 300, 4_937_045},
		{"BigEntriesFewerOfThem", 0.25, 565 * mib, 100_000, 8192},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := scaledThreshold(8192, c.ratio, c.state, minScaledState, c.entryBytes); got != c.want {
				t.Fatalf("scaledThreshold = %d, want %d", got, c.want)
			}
		})
	}
}

// TestScaleSnapshots checks that a node raises Raft's snapshot threshold
// with its state file, and so bounds what a snapshot writes per entry.
func TestScaleSnapshots(t *testing.T) {
	h := openHeldLeader(t, func(c *Config) { c.SnapshotThreshold = 16 })
	n := h.Node
	n.scaler.minState = 1 // scale at any size
	ctx := context.Background()
	for range 100 {
		if _, err := n.Propose(ctx, submitOf(1)); err != nil {
			t.Fatal(err)
		}
	}
	got := n.scaleOnce()
	size, err := n.fsm.StoreSize()
	if err != nil {
		t.Fatal(err)
	}
	mean := n.scaler.entryBytes
	want := uint64(0.25 * float64(size.CopyBytes) / mean)
	if mean <= 0 || got < want*9/10 || got > want*11/10 || got <= 16 {
		t.Fatalf("threshold %d for a state of %d bytes and %.0f-byte entries, want about %d", got, size.CopyBytes, mean, want)
	}
	if st := n.Stats(); st.SnapshotThreshold != got {
		t.Fatalf("Stats().SnapshotThreshold = %d, want Raft's %d", st.SnapshotThreshold, got)
	}
	perEntry := float64(size.CopyBytes) / float64(got)
	t.Logf("state %d B, mean entry %.0f B: threshold %d entries, a snapshot writes %.0f B per entry (%.1f per log byte)",
		size.CopyBytes, mean, got, perEntry, perEntry/mean)

	n.cfg.SnapshotLogRatio = 0
	if got := n.scaleOnce(); got != 16 {
		t.Fatalf("without a ratio the threshold is %d, want the floor 16", got)
	}
}
