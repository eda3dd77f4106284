package fsm_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// FuzzDecodeApply feeds arbitrary bytes to the log decoder and applies what
// it accepts to an FSM that already holds jobs, a worker, a lease and a
// schedule. Bytes that are not an entry must be refused by Decode; a command
// that Decode accepted must be applied or rejected through Result.Err, never
// panic: a panic in Apply stops every node of the cluster at the same index.
// The cleanup of newTestFSM then checks the store's and the indexes'
// invariants. A version 1 (JSON) entry must also mean the same as the
// version 2 bytes Encode writes for it: applied to a second FSM, they give
// the same results and state.
//
// Run it with: go test -run='^$' -fuzz='^FuzzDecodeApply$' -fuzztime=30s ./fsm
func FuzzDecodeApply(f *testing.F) {
	for _, c := range append(everyOp(), fuzzSeedCmds()...) {
		f.Add(entryBytes(f, c))
		f.Add(jsonEntryBytes(f, &fsm.Entry{Now: t0.Add(time.Second).UnixNano(), Cmds: []fsm.Cmd{c}}))
	}
	f.Add([]byte{})
	f.Add([]byte{fsm.EncodingVersion})
	f.Add([]byte{fsm.EncodingVersion + 1, '{', '}'})
	f.Add([]byte{fsm.EncodingVersion, 2, 1, 99, 0, 0})
	f.Add([]byte("\x02\x02\x01\x00" + withLen(`{"op":"set_node","node":{}}`)))
	f.Add([]byte("\x02\x02\x02\x00" + withLen(`{"op":"pause_queue","queue":{"name":""}}`) + "\x03\x00\x00\x00"))
	f.Add([]byte{1})
	f.Add([]byte("\x01" + `{"now":1,"cmds":[{"op":"submit"}]}`))
	f.Add([]byte("\x01" + `{"now":-9223372036854775808,"cmds":[{"op":"claim","claim":{"worker":"","max":-5,"ttl":-1}}]}`))
	f.Add([]byte("\x01" + `{"cmds":[{"op":"set_node","node":{}},{"op":"remove_node","node":{}}]}`))
	f.Add([]byte("\x01" + `{"cmds":[{"op":"pause_queue","queue":{"name":""}}]}`))
	f.Add([]byte("\x01" + `{"cmds":[{"op":"register","worker":{"worker":{}}}]}`))
	f.Add([]byte("\x01" + `{"cmds":[{"op":"submit","submit":{"jobs":[]}},{"op":"claim","claim":{"worker":"w","queues":[],"max":1,"ttl":1}}]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := fsm.Decode(data)
		if err != nil {
			return // ApplyBatch stops the node on such bytes, by design
		}
		fz := newTestFSM(t)
		prelude(t, fz)
		out := fz.ApplyBatch([]*raft.Log{{Index: 100, Type: raft.LogCommand, Data: data}})
		res, ok := out[0].([]fsm.Result)
		if !ok || len(res) != len(e.Cmds) {
			t.Fatalf("applied %d commands, got reply %#v", len(e.Cmds), out[0])
		}
		if data[0] != fsm.EncodingVersion {
			bin := newTestFSM(t)
			prelude(t, bin)
			out2 := bin.ApplyBatch([]*raft.Log{{Index: 100, Type: raft.LogCommand, Data: mustEncode(t, e)}})
			if a, b := resultsJSON(t, out), resultsJSON(t, out2); !slices.Equal(a, b) {
				t.Fatalf("the JSON entry and its binary one gave different results:\n%s\n%s", a, b)
			}
			if digest(t, fz) != digest(t, bin) {
				t.Fatal("the JSON entry and its binary one left different states")
			}
		}
		// The state must still take ordinary commands afterwards.
		applyCmd(t, fz, 101, t0.Add(time.Hour), submit(fsm.NewJob{Command: "after"}))
	})
}

// prelude gives a fuzzed entry some state to act on: pending, running and
// blocked jobs, a worker and a schedule.
func prelude(t *testing.T, f *fsm.FSM) {
	t.Helper()
	applyCmd(t, f, 1, t0, register(store.Worker{ID: "w", Queues: []string{"default"}}))
	applyCmd(t, f, 2, t0, submit(
		fsm.NewJob{Command: "a"},
		fsm.NewJob{Command: "b", IdempotencyKey: "k"},
		fsm.NewJob{Type: "t", Payload: json.RawMessage(`{}`), DependsOn: []string{"$0"}},
	))
	applyCmd(t, f, 3, t0, claimCmd(fsm.Claim{WorkerID: "w", Queues: []string{"default"}, Shell: true, Max: 1, LeaseTTL: int64(ttl)}))
	applyCmd(t, f, 4, t0, fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: &fsm.PutSchedule{
		Name: "s", Cron: "* * * * *", Job: fsm.NewJob{Command: "tick"}, Overlap: fsm.OverlapQueue, Catchup: fsm.CatchupOne, Create: true,
	}})
	applyCmd(t, f, 5, t0, fsm.Cmd{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: 2, Job: fsm.NewJob{Command: "g"}}})
}

// fuzzSeedCmds are commands aimed at the prelude's state, with edge values.
func fuzzSeedCmds() []fsm.Cmd {
	tick := t0.Add(time.Minute).UnixNano()
	return []fsm.Cmd{
		succeed("job-1", 3),
		fail("job-1", 3, "boom"),
		expire("job-1", 3),
		heartbeat("job-1", 0, ttl),
		workerHeartbeat("w", ttl),
		{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: "w", Listed: true, Leases: []fsm.LeaseRef{{JobID: "job-1", Lease: 3}, {JobID: "nope"}}}},
		cancel("job-1", true),
		cancel("job-3", false),
		retry("job-2"),
		retryDeps("job-3"),
		{Op: fsm.OpFire, Fire: &fsm.Fire{Name: "s", Tick: tick, JobID: fsm.FireJobID("s", tick, false)}},
		{Op: fsm.OpFire, Fire: &fsm.Fire{Name: "s", Tick: tick, JobID: "wrong", Skip: true, Missed: -3}},
		{Op: fsm.OpFire, Fire: &fsm.Fire{Name: "s", Tick: -1, Manual: true}},
		{Op: fsm.OpPauseSchedule, PauseSchedule: &fsm.PauseSchedule{Name: "s", Paused: true}},
		{Op: fsm.OpDeleteSchedule, DeleteSchedule: &fsm.DeleteSchedule{Name: "s"}},
		{Op: fsm.OpPutSchedule, PutSchedule: &fsm.PutSchedule{Name: "", Cron: "", Job: fsm.NewJob{}}},
		submit(fsm.NewJob{ID: "x", Command: "c", DependsOn: []string{"$1", "job-1"}}, fsm.NewJob{Command: "d", MaxAttempts: -1, Priority: -1 << 40, Timeout: -1, RunAt: -1}),
		submit(fsm.NewJob{Command: "e", IdempotencyKey: "k", UniqueFor: 1 << 62, Retention: -1, Backoff: store.Backoff{Base: -1, Max: -1, Jitter: -2}}),
		claimCmd(fsm.Claim{WorkerID: "w2", Max: 1 << 30, LeaseTTL: 1 << 62}),
		register(store.Worker{ID: "w", Tags: []string{""}}),
		pause("", true),
		{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: []string{"", "job-1", "job-1"}}},
		{Op: fsm.OpSetNode, Node: &store.Node{}},
		// Gangs: the prelude's is gang-4 with tasks job-5 and job-6.
		{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: 0, Job: fsm.NewJob{Command: "g"}}},
		{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: 1 << 20, Job: fsm.NewJob{Command: "g", DependsOn: []string{"job-1"}}}},
		{Op: fsm.OpReserveGang, ReserveGang: &fsm.ReserveGang{GangID: "gang-4", Epoch: 0, Workers: []string{"w", "w"}}},
		{Op: fsm.OpReserveGang, ReserveGang: &fsm.ReserveGang{GangID: "gang-4", Workers: []string{"w"}}},
		{Op: fsm.OpReserveGang, ReserveGang: &fsm.ReserveGang{GangID: "", Workers: nil}},
		{Op: fsm.OpUnreserveGang, Gang: &fsm.GangRef{GangID: "gang-4", Epoch: 1}},
		{Op: fsm.OpForceDrain, Gang: &fsm.GangRef{GangID: "gang-4", Epoch: 1}},
		{Op: fsm.OpWorkerOffline, WorkerOffline: &fsm.WorkerOffline{WorkerID: "w", SeenAt: 1 << 62}},
		{Op: fsm.OpPreempted, Preempted: &fsm.Preempted{JobID: "job-5", Epoch: 1}},
		{Op: fsm.OpCheckpoint, Checkpoint: &fsm.Checkpoint{JobID: "job-5", Epoch: 1, Data: []byte("ck")}},
		{Op: fsm.OpCheckpoint, Checkpoint: &fsm.Checkpoint{JobID: "job-1", Epoch: 0, Data: nil}},
		// The fields of ProtocolFence: owners, leases required, lost claims.
		{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "w3"}, Token: "t1"}},
		claimCmd(fsm.Claim{WorkerID: "w3", LeaseTTL: 1 << 30, Token: "t1", Fenced: true, Seq: 9}),
		claimCmd(fsm.Claim{WorkerID: "w3", LeaseTTL: 1 << 30, Token: "t2", Seq: 10}),
		report(fsm.Report{JobID: "job-1", Success: true, Token: "t2"}),
		{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: "job-1", LeaseTTL: 1, Token: "t1"}},
		{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: "w3", LeaseTTL: 1, Listed: true, Token: "t1", ClaimsFrom: 1, ClaimsTo: 9}},
		{Op: fsm.OpPreempted, Preempted: &fsm.Preempted{JobID: "job-5", Epoch: 1, Token: "t2"}},
		{Op: fsm.OpCheckpoint, Checkpoint: &fsm.Checkpoint{JobID: "job-5", Epoch: 1, Data: []byte("ck"), Token: "t2"}},
		// Flow control: limits, keys, bad limits.
		setLimits("default", store.QueueLimits{Concurrency: 2, KeyConcurrency: 1, Rate: store.Rate{Count: 2, Per: 1e9}, KeyRate: store.Rate{Count: 1, Per: 1e9}}),
		submit(fsm.NewJob{Command: "k", ConcurrencyKey: "acme"}, fsm.NewJob{Command: "k", ConcurrencyKey: "acme"}, fsm.NewJob{Command: "k", ConcurrencyKey: "b"}),
		claimCmd(fsm.Claim{WorkerID: "w", Max: 5, LeaseTTL: 1 << 30}),
		setLimits("default", store.QueueLimits{Concurrency: -1, Rate: store.Rate{Count: -1, Per: 0}, Burst: -1}),
		setLimits("default", store.QueueLimits{}),
		// Fairness and backpressure: weights, fair claims, pauses, snoozes.
		setLimits("default", store.QueueLimits{KeyWeights: map[string]int{"acme": 3}}),
		submit(fsm.NewJob{Command: "k", ConcurrencyKey: "acme"}, fsm.NewJob{Command: "k", ConcurrencyKey: "b"}, fsm.NewJob{Command: "k"}),
		claimCmd(fsm.Claim{WorkerID: "w", Max: 2, LeaseTTL: 1 << 30, Fair: true}),
		report(fsm.Report{JobID: "job-9", Error: "429", RateLimitedFor: 1e9}),
		report(fsm.Report{JobID: "job-10", SnoozeFor: 1e9, Token: "t1"}),
		report(fsm.Report{JobID: "job-9", RateLimitedFor: -1}),
	}
}

// TestUnstorableKeysAreRejected covers what the fuzzer cannot reach in
// reasonable time: keys longer than the store takes. Each command is
// rejected with a ValidationError and changes nothing.
func TestUnstorableKeysAreRejected(t *testing.T) {
	long := strings.Repeat("k", fsm.MaxKeyBytes+1)
	if fsm.MaxKeyBytes != bolt.MaxKeySize {
		t.Fatalf("fsm.MaxKeyBytes = %d, bbolt's MaxKeySize = %d", fsm.MaxKeyBytes, bolt.MaxKeySize)
	}
	tick := t0.Add(time.Minute).UnixNano()
	cases := map[string]fsm.Cmd{
		"JobID":          submit(fsm.NewJob{ID: long, Command: "c"}),
		"IdempotencyKey": submit(fsm.NewJob{IdempotencyKey: long, Command: "c"}),
		"WorkerID":       register(store.Worker{ID: long}),
		"QueueName":      pause(long, true),
		"NodeID":         {Op: fsm.OpSetNode, Node: &store.Node{ID: long}},
		"EmptyNodeID":    {Op: fsm.OpSetNode, Node: &store.Node{}},
		"ScheduleName":   {Op: fsm.OpPutSchedule, PutSchedule: &fsm.PutSchedule{Name: long, Cron: "* * * * *", Job: fsm.NewJob{Command: "c"}, Overlap: fsm.OverlapAllow, Catchup: fsm.CatchupOne, Create: true}},
		"FireJobID":      {Op: fsm.OpFire, Fire: &fsm.Fire{Name: "s", Tick: tick, JobID: long}},
		"ClaimWorkerID":  claimCmd(fsm.Claim{WorkerID: long, Shell: true, Max: 1, LeaseTTL: 1}),
		"HeartbeatOfID":  {Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: long, LeaseTTL: 1}},
		"ConcurrencyKey": submit(fsm.NewJob{Command: "c", ConcurrencyKey: long}),
		"LimitsQueue":    setLimits(long, store.QueueLimits{Concurrency: 1}),
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newTestFSM(t)
			prelude(t, f)
			before := digest(t, f)
			res := applyCmd(t, f, 100, t0.Add(time.Second), c)
			var ve *fsm.ValidationError
			if !errors.As(res[0].Err, &ve) {
				t.Fatalf("result error = %v, want a ValidationError", res[0].Err)
			}
			if len(ve.Error()) > 200 {
				t.Errorf("the error quotes the whole key: %d bytes", len(ve.Error()))
			}
			if after := digest(t, f); after == before {
				return
			}
			// Only the applied index and time may move.
			g := newTestFSM(t)
			prelude(t, g)
			applyCmd(t, g, 100, t0.Add(time.Second))
			if digest(t, g) != digest(t, f) {
				t.Error("the rejected command changed the state")
			}
		})
	}
}

func entryBytes(tb testing.TB, cmds ...fsm.Cmd) []byte {
	tb.Helper()
	data, err := fsm.Encode(&fsm.Entry{Now: t0.Add(time.Second).UnixNano(), Cmds: cmds})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestUnstorableKeyNamesItsJob: a key too long for the store, on a later
// job of a batch, is rejected naming that job's field.
func TestUnstorableKeyNamesItsJob(t *testing.T) {
	long := strings.Repeat("k", fsm.MaxKeyBytes+1)
	for field, nj := range map[string]fsm.NewJob{
		"jobs[2].id":              {ID: long, Command: "c"},
		"jobs[2].idempotency_key": {IdempotencyKey: long, Command: "c"},
		"jobs[2].concurrency_key": {ConcurrencyKey: long, Command: "c"},
	} {
		f := newTestFSM(t)
		res := applyCmd(t, f, 1, t0, submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, nj))
		var ve *fsm.ValidationError
		if !errors.As(res[0].Err, &ve) || ve.Field != field {
			t.Errorf("result error = %v, want a ValidationError of %s", res[0].Err, field)
		}
	}
}
