//go:build !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// protocol1Ops are the ops of every release before protocol versions: a
// node of protocol 1 applies them, so they never need more. Any other op
// needs a newer protocol, or an older node would stop at it.
var protocol1Ops = map[fsm.Op]bool{
	fsm.OpSubmit: true, fsm.OpClaim: true, fsm.OpHeartbeat: true, fsm.OpWorkerHeartbeat: true,
	fsm.OpReport: true, fsm.OpExpire: true, fsm.OpRegister: true, fsm.OpCancel: true, fsm.OpRetry: true,
	fsm.OpSetNode: true, fsm.OpRemoveNode: true, fsm.OpPauseQueue: true, fsm.OpDelete: true,
	fsm.OpPutSchedule: true, fsm.OpDeleteSchedule: true, fsm.OpPauseSchedule: true, fsm.OpFire: true,
	fsm.OpSubmitGang: true, fsm.OpReserveGang: true, fsm.OpUnreserveGang: true, fsm.OpForceDrain: true,
	fsm.OpWorkerOffline: true, fsm.OpPreempted: true, fsm.OpCheckpoint: true,
}

func TestProtocol(t *testing.T) {
	t.Run("EveryOpAfterProtocol1NeedsMore", func(t *testing.T) {
		for _, c := range everyOp() {
			p := c.Protocol()
			switch {
			case protocol1Ops[c.Op] && p != 1:
				t.Errorf("%s needs protocol %d; protocol 1 nodes apply it", c.Op, p)
			case !protocol1Ops[c.Op] && p < 2:
				t.Errorf("%s needs protocol %d, but no release of protocol 1 knows it: list it in opProtocol", c.Op, p)
			case p > fsm.ProtocolVersion:
				t.Errorf("%s needs protocol %d, beyond this binary's %d", c.Op, p, fsm.ProtocolVersion)
			}
		}
	})
	t.Run("AnEntryNeedsItsNewestCommand", func(t *testing.T) {
		cases := []struct {
			cmds []fsm.Cmd
			want int
		}{
			{nil, 1},
			{[]fsm.Cmd{cancel("job-1", true), retry("job-1")}, 1},
			{[]fsm.Cmd{cancel("job-1", true), retryDeps("job-1"), retry("job-1")}, 2},
			{[]fsm.Cmd{claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1})}, 1},
			{[]fsm.Cmd{claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Fenced: true})}, fsm.ProtocolFence},
			{[]fsm.Cmd{claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Seq: 4})}, fsm.ProtocolFence},
			{[]fsm.Cmd{{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: "job-1", LeaseTTL: 1, Token: "fleet"}}}, fsm.ProtocolFence},
			{[]fsm.Cmd{{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: "w", LeaseTTL: 1, ClaimsTo: 3}}}, fsm.ProtocolFence},
			{[]fsm.Cmd{report(fsm.Report{JobID: "job-1", Success: true}), report(fsm.Report{JobID: "job-1", Token: "fleet"})}, fsm.ProtocolFence},
			{[]fsm.Cmd{{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "w"}}}}, 1},
			{[]fsm.Cmd{{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "w"}, Token: "fleet"}}}, fsm.ProtocolFence},
			{[]fsm.Cmd{submit(fsm.NewJob{Command: "x"}, fsm.NewJob{Command: "y", ConcurrencyKey: "acme"})}, fsm.ProtocolFlow},
			{[]fsm.Cmd{submitGang(2, fsm.NewJob{Command: "g", ConcurrencyKey: "acme"})}, fsm.ProtocolFlow},
			{[]fsm.Cmd{setLimits("q", store.QueueLimits{Concurrency: 1})}, fsm.ProtocolFlow},
			{[]fsm.Cmd{submit(fsm.NewJob{Command: "x", ConcurrencyKey: "acme", TraceParent: testTraceParent})}, fsm.ProtocolTrace},
			{[]fsm.Cmd{setLimits("q", store.QueueLimits{KeyWeights: map[string]int{"a": 2}})}, fsm.ProtocolFair},
			{[]fsm.Cmd{claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Fair: true})}, fsm.ProtocolFair},
			{[]fsm.Cmd{claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Fenced: true, Ack: true})}, fsm.ProtocolAck},
			{[]fsm.Cmd{report(fsm.Report{JobID: "job-1", RateLimitedFor: 1})}, fsm.ProtocolBackpressure},
			{[]fsm.Cmd{report(fsm.Report{JobID: "job-1", Token: "fleet", SnoozeFor: 1})}, fsm.ProtocolBackpressure},
		}
		for _, c := range cases {
			e := fsm.Entry{Cmds: c.cmds}
			if got := e.Protocol(); got != c.want {
				t.Errorf("entry of %d commands needs protocol %d, want %d", len(c.cmds), got, c.want)
			}
		}
	})
}
