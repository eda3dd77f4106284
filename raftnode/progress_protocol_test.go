package raftnode_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// leaderBesideProtocol2 is the leader of a two-node cluster whose other
// member it takes to run protocol 2.
func leaderBesideProtocol2(ctx context.Context, t *testing.T) *raftnode.Node {
	t.Helper()
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap = true })
	waitFor(t, 10*time.Second, leads(n1))
	n2 := openNode(t, "n2", nil, nil)
	if err := n1.AddVoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	n1.SetMemberProtocols(map[string]int{"n2": 2})
	return n1
}

// wantRefused checks that the commands whose errs are refused as needing
// protocol need are those want says, in order.
func wantRefused(t *testing.T, errs []error, need int, want ...bool) {
	t.Helper()
	for i, want := range want {
		var ue *raftnode.NeedsUpgradeError
		refused := errors.As(errs[i], &ue)
		if refused != want || (refused && ue.Need != need) {
			t.Errorf("command %d at protocol 2: %v, want refused %v (needing %d)", i, errs[i], want, need)
		}
	}
}

// Progress on a heartbeat and a result on a report need protocol 3: while a
// member runs 2 they are refused before reaching the log (the API answers
// 503 upgrade_in_progress), and the same commands without them go through.
func TestProposeGatesProgressAndResults(t *testing.T) {
	if fsm.ProtocolVersion < fsm.ProtocolProgress {
		t.Skip("this binary is older than protocol 3")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n1 := leaderBesideProtocol2(ctx, t)

	hb := func(p *fsm.LeaseProgress) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{
			WorkerID: "w", LeaseTTL: int64(time.Second), Listed: true, Leases: []fsm.LeaseRef{{JobID: "job-1", Lease: 1, Progress: p}},
		}}
	}
	rep := func(result string) fsm.Cmd {
		r := &fsm.Report{JobID: "job-1", Lease: 1, Success: true}
		if result != "" {
			r.Result = json.RawMessage(result)
		}
		return fsm.Cmd{Op: fsm.OpReport, Report: r}
	}
	jobHB := func(p *fsm.LeaseProgress) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: "job-1", Lease: 1, LeaseTTL: int64(time.Second), Progress: p}}
	}
	_, errs := n1.ProposeAll(ctx, []fsm.Cmd{hb(&fsm.LeaseProgress{Percent: 5}), rep(`{"n":1}`), jobHB(&fsm.LeaseProgress{Percent: 5}),
		hb(nil), rep(""), jobHB(nil)})
	wantRefused(t, errs, fsm.ProtocolProgress, true, true, true, false, false, false)
	n1.SetMemberProtocols(map[string]int{"n2": 3})
	_, errs = n1.ProposeAll(ctx, []fsm.Cmd{hb(&fsm.LeaseProgress{Percent: 5}), rep(`{"n":1}`), jobHB(&fsm.LeaseProgress{Percent: 5})})
	if !errors.Is(errs[0], fsm.ErrWorkerNotFound) || !errors.Is(errs[1], fsm.ErrNotFound) || !errors.Is(errs[2], fsm.ErrNotFound) {
		t.Fatalf("at protocol 3: %v, want both applied (and refused by the FSM: no such worker, job)", errs)
	}
}

// A gang or a fire that carries a trace needs protocol 3: while a member
// runs 2 it is refused before reaching the log (the API then submits the
// gang without its trace, and the scheduler fires the tick without it),
// and the same command without the trace goes through.
func TestProposeGatesTracedGangsAndFires(t *testing.T) {
	if fsm.ProtocolVersion < fsm.ProtocolTrace {
		t.Skip("this binary is older than protocol 3")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n1 := leaderBesideProtocol2(ctx, t)

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	gang := func(tp string) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: 2, Job: fsm.NewJob{Command: "g", TraceParent: tp}}}
	}
	fire := func(tp string) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpFire, Fire: &fsm.Fire{Name: "nope", Tick: 1, JobID: fsm.FireJobID("nope", 1, false), TraceParent: tp}}
	}
	_, errs := n1.ProposeAll(ctx, []fsm.Cmd{gang(tp), fire(tp), gang(""), fire("")})
	wantRefused(t, errs, fsm.ProtocolTrace, true, true, false, false)
	if errs[2] != nil || !errors.Is(errs[3], fsm.ErrScheduleNotFound) {
		t.Fatalf("without a trace at protocol 2: %v, want the gang made and the fire applied (no such schedule)", errs[2:])
	}
}
