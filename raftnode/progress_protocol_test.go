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

// Progress on a heartbeat and a result on a report need protocol 3: while a
// member runs 2 they are refused before reaching the log (the API answers
// 503 upgrade_in_progress), and the same commands without them go through.
func TestProposeGatesProgressAndResults(t *testing.T) {
	if fsm.ProtocolVersion < fsm.ProtocolProgress {
		t.Skip("this binary is older than protocol 3")
	}
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap = true })
	waitFor(t, 10*time.Second, leads(n1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n2 := openNode(t, "n2", nil, nil)
	if err := n1.AddVoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	n1.SetMemberProtocols(map[string]int{"n2": 2})

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
	_, errs := n1.ProposeAll(ctx, []fsm.Cmd{hb(&fsm.LeaseProgress{Percent: 5}), rep(`{"n":1}`), hb(nil), rep("")})
	for i, want := range []bool{true, true, false, false} {
		var ue *raftnode.NeedsUpgradeError
		refused := errors.As(errs[i], &ue)
		if refused != want || (refused && ue.Need != fsm.ProtocolProgress) {
			t.Errorf("command %d at protocol 2: %v, want refused %v (needing 3)", i, errs[i], want)
		}
	}
	n1.SetMemberProtocols(map[string]int{"n2": 3})
	_, errs = n1.ProposeAll(ctx, []fsm.Cmd{hb(&fsm.LeaseProgress{Percent: 5}), rep(`{"n":1}`)})
	if !errors.Is(errs[0], fsm.ErrWorkerNotFound) || !errors.Is(errs[1], fsm.ErrNotFound) {
		t.Fatalf("at protocol 3: %v, want both applied (and refused by the FSM: no such worker, job)", errs)
	}
}
