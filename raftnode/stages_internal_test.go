package raftnode

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The tracer splits an entry's time into its stages from what the log
// store, the transport and the state machine note, and traces nothing on
// a node that proposes nothing (a follower), whose log writes it still
// times.
func TestTracerStages(t *testing.T) {
	tr := newTracer()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	log := &raft.Log{Index: 7, Type: raft.LogCommand, AppendedAt: at(1)}

	tr.stored([]*raft.Log{log}, at(1), at(2))
	tr.done(7, at(0), at(9))
	if n := tr.stages[stageApply].snapshot().Count; n != 0 {
		t.Fatalf("a follower's write was traced: %d applies observed", n)
	}
	if n := tr.logWrite.snapshot().Count; n != 1 {
		t.Fatalf("%d log writes timed, want 1", n)
	}

	tr.proposing.Add(1)
	tr.stored([]*raft.Log{log}, at(1), at(3))  // written 1..3
	tr.acked(7, at(6))                         // a follower answered at 6
	tr.applied([]*raft.Log{log}, at(7), at(8)) // applied 7..8
	tr.done(7, at(0), at(10))                  // proposed at 0, answered at 10
	want := map[int]time.Duration{
		stageDispatch: time.Millisecond, stageLeaderWrite: 2 * time.Millisecond, stageReplicate: 3 * time.Millisecond,
		stageCommitNotice: time.Millisecond, stageApply: time.Millisecond, stageReply: 2 * time.Millisecond,
	}
	for stage, d := range want {
		h := tr.stages[stage].snapshot()
		if h.Count != 1 || time.Duration(h.Sum*float64(time.Second)).Round(time.Microsecond) != d {
			t.Errorf("stage %s: %d observations summing to %vs, want one of %s", stageNames[stage], h.Count, h.Sum, d)
		}
	}
	if len(tr.traces) != 0 {
		t.Errorf("%d traces kept after their entry was answered", len(tr.traces))
	}
}
