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

	tr.writing([]*raft.Log{log})
	tr.stored([]*raft.Log{log}, at(1), at(2))
	tr.done(7, at(0), at(9))
	if n := tr.stages[stageApply].snapshot().Count; n != 0 {
		t.Fatalf("a follower's write was traced: %d applies observed", n)
	}
	if n := tr.logWrite.snapshot().Count; n != 1 {
		t.Fatalf("%d log writes timed, want 1", n)
	}

	tr.proposing.Add(1)
	tr.writing([]*raft.Log{log})
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

// The leader writes an entry while it replicates it, so a follower may
// answer before the leader's own write ends: the entry is committed when
// both are done, replicate is then 0 and commit_notice runs from the end
// of the leader's write.
func TestTracerStagesFollowerAnswersFirst(t *testing.T) {
	tr := newTracer()
	tr.proposing.Add(1)
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	log := &raft.Log{Index: 3, Type: raft.LogCommand, AppendedAt: at(1)}

	tr.writing([]*raft.Log{log})               // the leader's write begins at 1
	tr.acked(3, at(3))                         // a follower answered at 3
	tr.stored([]*raft.Log{log}, at(1), at(5))  // the leader's write ended at 5
	tr.applied([]*raft.Log{log}, at(6), at(7)) // applied 6..7
	tr.done(3, at(0), at(8))                   // proposed at 0, answered at 8
	want := map[int]time.Duration{
		stageDispatch: time.Millisecond, stageLeaderWrite: 4 * time.Millisecond, stageReplicate: 0,
		stageCommitNotice: time.Millisecond, stageApply: time.Millisecond, stageReply: time.Millisecond,
	}
	for stage, d := range want {
		h := tr.stages[stage].snapshot()
		if h.Count != 1 || time.Duration(h.Sum*float64(time.Second)).Round(time.Microsecond) != d {
			t.Errorf("stage %s: %d observations summing to %vs, want one of %s", stageNames[stage], h.Count, h.Sum, d)
		}
	}
}
