//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestUnacknowledgedAttempt checks that an attempt of a claim of
// ProtocolAck that ends by its lease before its worker named it does not
// count, up to fsm.MaxUnacked a job, and that one its worker acknowledged
// counts as before.
func TestUnacknowledgedAttempt(t *testing.T) {
	listed := func(worker string, leases ...fsm.LeaseRef) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{
			WorkerID: worker, LeaseTTL: int64(ttl), Listed: true, Leases: leases}}
	}
	// claimed submits one job of max_attempts 1 and has w1 claim it with
	// Ack.
	claimed := func(t *testing.T) (*harness, *store.Job) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1, Backoff: store.Backoff{Base: int64(time.Minute)}})
		j := h.claim(fsm.Claim{WorkerID: "w1", Fenced: true, Ack: true})[0]
		if !j.AwaitingAck {
			t.Fatal("a claim with Ack: the attempt does not await acknowledgement")
		}
		return h, j
	}
	// returned checks that j's last attempt ended unacknowledged, not
	// counted, and that j is pending again at once.
	returned := func(t *testing.T, h *harness, j *store.Job, unacked int) *store.Job {
		t.Helper()
		got := h.job(j.ID)
		if got.Status != store.StatusPending || got.Attempts != j.Attempts-1 || got.RunAt > ns(h.now) ||
			got.LeaseDeadline != 0 || got.AwaitingAck || got.Unacked != unacked {
			t.Fatalf("after the expiry: %s attempts %d run at %d (now %d) deadline %d awaiting %v unacked %d",
				got.Status, got.Attempts, got.RunAt, ns(h.now), got.LeaseDeadline, got.AwaitingAck, got.Unacked)
		}
		last := got.History[len(got.History)-1]
		if last.Status != store.StatusReturned || !last.Expired || last.Lease != j.Lease || last.Attempt != j.Attempts ||
			!strings.HasPrefix(last.Error, "unacknowledged, not counted") {
			t.Fatalf("last attempt %+v, want returned, expired, unacknowledged", last)
		}
		checkIndexes(t, h.f)
		return got
	}

	t.Run("ExpiryBeforeTheFirstHeartbeatDoesNotCount", func(t *testing.T) {
		h, j := claimed(t)
		h.at(ttl + time.Second)
		r := h.ok(expire(j.ID, j.Lease))
		got := returned(t, h, j, 1)
		if !strings.Contains(got.History[0].Error, "lease expired: worker w1 stopped heartbeating") {
			t.Errorf("history error %q does not say why the attempt ended", got.History[0].Error)
		}
		if !reflect.DeepEqual(r.Jobs[0], got) {
			t.Errorf("expire result %+v, stored %+v", r.Jobs[0], got)
		}
		// Its lease is dead; the one attempt max_attempts allows is still
		// there for another worker, which runs it to the end.
		h.reject(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true}), fsm.ErrStaleLease)
		k := h.claim(fsm.Claim{WorkerID: "w2", Fenced: true, Ack: true})[0]
		if k.ID != j.ID || k.Attempts != 1 || k.Lease <= j.Lease {
			t.Fatalf("reclaimed %s attempt %d lease %d", k.ID, k.Attempts, k.Lease)
		}
		h.ok(succeed(k.ID, k.Lease))
		h.status(store.StatusDone, j.ID)
		snapshotRestore(t, h.f)
	})

	t.Run("ExpiryAfterAHeartbeatCounts", func(t *testing.T) {
		h, j := claimed(t)
		h.at(time.Second)
		h.ok(heartbeat(j.ID, j.Lease, ttl))
		if h.job(j.ID).AwaitingAck {
			t.Fatal("a job heartbeat did not acknowledge the attempt")
		}
		h.at(ttl + 2*time.Second)
		h.ok(expire(j.ID, j.Lease))
		got := h.job(j.ID)
		if got.Status != store.StatusFailed || got.Attempts != 1 || got.Unacked != 0 || got.History[0].Status != store.StatusFailed {
			t.Fatalf("after the expiry: %s attempts %d unacked %d history %+v, want failed on its one attempt",
				got.Status, got.Attempts, got.Unacked, got.History)
		}
	})

	t.Run("AHeartbeatAtItsDeadlineStillAcknowledges", func(t *testing.T) {
		// A heartbeat that moves no deadline (a timeout caps it) still
		// records the acknowledgement.
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1, Timeout: int64(time.Second)})
		j := h.claim(fsm.Claim{WorkerID: "w1", Ack: true})[0]
		h.ok(heartbeat(j.ID, j.Lease, ttl))
		if got := h.job(j.ID); got.AwaitingAck || got.LeaseDeadline != j.LeaseDeadline {
			t.Fatalf("after the heartbeat: awaiting %v deadline %d (was %d)", got.AwaitingAck, got.LeaseDeadline, j.LeaseDeadline)
		}
	})

	t.Run("AWorkerHeartbeatThatListsItAcknowledges", func(t *testing.T) {
		h, j := claimed(t)
		h.ok(register(store.Worker{ID: "w1"}))
		h.at(time.Second)
		h.ok(listed("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease}))
		if h.job(j.ID).AwaitingAck {
			t.Fatal("a worker heartbeat listing the attempt did not acknowledge it")
		}
	})

	t.Run("AWorkerHeartbeatThatListsNothingDoesNot", func(t *testing.T) {
		// V0 workers send no list: it renews the lease, but says
		// nothing of which claim replies the worker received.
		h, j := claimed(t)
		h.ok(register(store.Worker{ID: "w1"}))
		h.at(time.Second)
		h.ok(workerHeartbeat("w1", ttl))
		got := h.job(j.ID)
		if !got.AwaitingAck || got.LeaseDeadline != ns(h.now.Add(ttl)) {
			t.Fatalf("after an unlisted heartbeat: awaiting %v deadline %d", got.AwaitingAck, got.LeaseDeadline)
		}
		h.at(ttl + 2*time.Second)
		h.ok(expire(j.ID, j.Lease))
		returned(t, h, j, 1)
	})

	t.Run("ATimeoutOrAWorkerDeclaredOfflineDoesNotCountEither", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{ID: "timed", Command: "x", MaxAttempts: 1, Timeout: int64(time.Second)},
			fsm.NewJob{ID: "held", Command: "y", MaxAttempts: 1})
		h.ok(register(store.Worker{ID: "w1"}))
		jobs := h.claim(fsm.Claim{WorkerID: "w1", Max: 2, Ack: true})
		h.at(time.Second + fsm.TimeoutMargin)
		h.ok(expire("timed", jobs[0].Lease))
		returned(t, h, jobs[0], 1)
		h.ok(workerOffline("w1", ns(h.now)))
		got := returned(t, h, jobs[1], 1)
		if !strings.Contains(got.History[0].Error, "worker w1 went offline") {
			t.Errorf("history error %q", got.History[0].Error)
		}
	})

	t.Run("AfterMaxUnackedTheNextCounts", func(t *testing.T) {
		// A job that kills its worker at once cannot run forever uncharged.
		h, j := claimed(t)
		at := time.Duration(0)
		for n := 1; n <= fsm.MaxUnacked; n++ {
			at += ttl + time.Second
			h.at(at)
			h.ok(expire(j.ID, j.Lease))
			returned(t, h, j, n)
			j = h.claim(fsm.Claim{WorkerID: "w1", Ack: true})[0]
			if j.Attempts != 1 || !j.AwaitingAck {
				t.Fatalf("claim %d: attempt %d awaiting %v", n+1, j.Attempts, j.AwaitingAck)
			}
		}
		h.at(at + ttl + time.Second)
		h.ok(expire(j.ID, j.Lease))
		got := h.job(j.ID)
		if got.Status != store.StatusFailed || got.Attempts != 1 || got.Unacked != fsm.MaxUnacked ||
			len(got.History) != fsm.MaxUnacked+1 || got.History[fsm.MaxUnacked].Status != store.StatusFailed {
			t.Fatalf("after %d unacknowledged expiries and one more: %s attempts %d unacked %d history %+v",
				fsm.MaxUnacked, got.Status, got.Attempts, got.Unacked, got.History)
		}
		// A retry gives a fresh attempt budget, not a fresh MaxUnacked.
		h.ok(retry(j.ID))
		j = h.claim(fsm.Claim{WorkerID: "w1", Ack: true})[0]
		h.at(at + 3*ttl)
		h.ok(expire(j.ID, j.Lease))
		h.status(store.StatusFailed, j.ID)
	})

	t.Run("AClaimWithoutAckKeepsTheOldRule", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1})
		j := h.claim(fsm.Claim{WorkerID: "w1", Fenced: true})[0]
		if j.AwaitingAck {
			t.Fatal("a claim without Ack marked its attempt")
		}
		h.at(ttl + time.Second)
		h.ok(expire(j.ID, j.Lease))
		if got := h.job(j.ID); got.Status != store.StatusFailed || got.Attempts != 1 {
			t.Fatalf("after the expiry: %s attempts %d, want failed", got.Status, got.Attempts)
		}
	})

	t.Run("ACancellingJobIsCancelled", func(t *testing.T) {
		h, j := claimed(t)
		h.ok(cancel(j.ID, false))
		h.at(ttl + time.Second)
		h.ok(expire(j.ID, j.Lease))
		if got := h.job(j.ID); got.Status != store.StatusCancelled || got.Unacked != 0 {
			t.Fatalf("after the expiry: %s unacked %d, want cancelled", got.Status, got.Unacked)
		}
	})

	t.Run("GangTasksAreNotMarked", func(t *testing.T) {
		h := setup(t)
		h.gpu("w1", 80000)
		id, _ := h.gang(1, fsm.NewJob{Command: "g", Resources: store.Resources{VRAMMB: 1000, Slots: 1}})
		h.ok(reserveGang(id, h.gangOf(id).Epoch, "w1"))
		jobs := h.claim(fsm.Claim{WorkerID: "w1", Shell: true, Ack: true})
		if len(jobs) != 1 || jobs[0].GangID == "" || jobs[0].AwaitingAck {
			t.Fatalf("claimed %+v, want the gang's task, not awaiting acknowledgement", jobs)
		}
	})

	t.Run("ASnapshotKeepsTheAckState", func(t *testing.T) {
		h, j := claimed(t)
		h.f = snapshotRestore(t, h.f)
		if got := h.job(j.ID); !got.AwaitingAck {
			t.Fatal("the restored job no longer awaits acknowledgement")
		}
		h.at(ttl + time.Second)
		h.ok(expire(j.ID, j.Lease))
		returned(t, h, j, 1)
		h.f = snapshotRestore(t, h.f)
		if got := h.job(j.ID); got.Unacked != 1 {
			t.Fatalf("the restored job has unacked %d, want 1", got.Unacked)
		}
	})
}

// TestClaimAckEncoding checks op code 23: a claim with Ack of each form
// round-trips, and bytes that are not a claim after the code are refused.
func TestClaimAckEncoding(t *testing.T) {
	for name, c := range map[string]fsm.Claim{
		"Plain":  {WorkerID: "w", LeaseTTL: 1, Ack: true},
		"Fenced": {WorkerID: "w", LeaseTTL: 1, Token: "fleet", Fenced: true, Seq: 9, Ack: true},
		"Fair":   {WorkerID: "w", LeaseTTL: 1, Fair: true, Ack: true},
		"Capped": {WorkerID: "w", LeaseTTL: 1, Token: "fleet", MaxWorkers: 5, Ack: true},
	} {
		e := &fsm.Entry{Now: 1, Cmds: []fsm.Cmd{claimCmd(c)}}
		b := mustEncode(t, e)
		if b[3] != 23 {
			t.Errorf("%s: op code %d, want 23", name, b[3])
		}
		if got := mustDecode(t, b); !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip = %s\nwant %s", name, dump(got), dump(e))
		}
		if p := e.Protocol(); p != max(fsm.ProtocolAck, fsm.ProtocolWorkerCap) {
			t.Errorf("%s: protocol %d, want %d", name, p, fsm.ProtocolAck)
		}
	}
	e, err := fsm.Decode(claimAckEntry)
	if err != nil || !e.Cmds[0].Claim.Ack || e.Cmds[0].Claim.WorkerID != "w" {
		t.Fatalf("Decode of claimAckEntry = %s, %v", dump(e), err)
	}
	for name, data := range map[string][]byte{
		"TwiceOver":       []byte("\x02\x00\x01\x17\x17\x02\x01w\x00\x00\x00\x00\x02"),
		"NotAClaim":       []byte("\x02\x00\x01\x17\x06\x01j\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00"), // an expire
		"AClaimAsJSON":    []byte("\x02\x00\x01\x17\x00" + withLen(`{"op":"claim","claim":{"worker":"w","ttl":1}}`)),
		"NothingAfter":    []byte("\x02\x00\x01\x17"),
		"ATruncatedClaim": []byte("\x02\x00\x01\x17\x02\x01w\x00"),
	} {
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("%s: Decode accepted %q", name, data)
		} else if errors.Is(err, fsm.ErrNotFound) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
