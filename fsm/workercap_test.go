//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func registerCapped(id, token string, max int) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: id}, Token: token, MaxWorkers: max}}
}

func offline(id string, seenAt int64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpWorkerOffline, WorkerOffline: &fsm.WorkerOffline{WorkerID: id, SeenAt: seenAt}}
}

// checkWorkerCounts checks the FSM's count of active ids per owner against
// the stored workers.
func checkWorkerCounts(t *testing.T, f *fsm.FSM) {
	t.Helper()
	workers, err := f.Workers()
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[string][]string)
	for _, w := range workers {
		if !w.Offline() {
			want[w.Owner] = append(want[w.Owner], w.ID)
		}
	}
	for _, owner := range []string{"", "a", "b"} {
		if got := f.ActiveWorkerIDs(owner); !slices.Equal(got, want[owner]) && len(got)+len(want[owner]) > 0 {
			t.Errorf("owner %q: active ids %v, stored %v", owner, got, want[owner])
		}
	}
}

func TestWorkerCap(t *testing.T) {
	t.Run("ANewIDBeyondTheCapIsRefused", func(t *testing.T) {
		h := setup(t)
		for _, id := range []string{"a1", "a2", "a3"} {
			h.ok(registerCapped(id, "a", 3))
		}
		r := h.reject(registerCapped("a4", "a", 3), fsm.ErrTooManyWorkers)
		var tm *fsm.TooManyWorkersError
		if !errors.As(r.Err, &tm) || tm.Owner != "a" || tm.Max != 3 {
			t.Fatalf("err %v, want a TooManyWorkersError of token a, cap 3", r.Err)
		}
		if _, err := h.f.Worker("a4"); !errors.Is(err, fsm.ErrWorkerNotFound) {
			t.Fatalf("a refused registration stored its worker: %v", err)
		}
		h.ok(registerCapped("a2", "a", 3)) // registering again takes no new slot
		h.ok(registerCapped("b1", "b", 3)) // another token counts its own
		// A claim as a new id registers it: refused alike; as a held id, served.
		h.submit(fsm.NewJob{Command: "x"})
		h.reject(claimCmd(fsm.Claim{WorkerID: "a5", LeaseTTL: int64(ttl), Token: "a", MaxWorkers: 3}), fsm.ErrTooManyWorkers)
		if got := h.claim(fsm.Claim{WorkerID: "a1", LeaseTTL: int64(ttl), Token: "a", MaxWorkers: 3}); len(got) != 1 {
			t.Fatalf("a claim as a held id got %d jobs, want 1", len(got))
		}
		// Without a cap (as protocol 3 applies it) nothing is counted against.
		h.ok(registerCapped("a6", "a", 0))
		checkWorkerCounts(t, h.f)
	})
	t.Run("OfflineAndForgottenFreeASlot", func(t *testing.T) {
		h := setup(t)
		h.ok(registerCapped("a1", "a", 2))
		w2 := h.ok(registerCapped("a2", "a", 2)).Worker
		h.reject(registerCapped("a3", "a", 2), fsm.ErrTooManyWorkers)
		h.at(time.Minute).ok(offline("a2", w2.LastHeartbeat))
		checkWorkerCounts(t, h.f)
		h.ok(registerCapped("a3", "a", 2))
		// a2 comes back: a new active id again, refused at the cap.
		h.reject(registerCapped("a2", "a", 2), fsm.ErrTooManyWorkers)
		h.reject(claimCmd(fsm.Claim{WorkerID: "a2", LeaseTTL: int64(ttl), Token: "a", MaxWorkers: 2}), fsm.ErrTooManyWorkers)
		w1, err := h.f.Worker("a1")
		if err != nil {
			t.Fatal(err)
		}
		h.at(time.Hour).ok(forget("a1", w1.LastHeartbeat))
		h.ok(registerCapped("a2", "a", 2))
		checkWorkerCounts(t, h.f)
	})
	t.Run("ARestoreKeepsTheCounts", func(t *testing.T) {
		h := setup(t)
		h.ok(registerCapped("a1", "a", 2))
		w := h.ok(registerCapped("a2", "a", 2)).Worker
		h.at(time.Minute).ok(offline("a2", w.LastHeartbeat))
		h.ok(registerCapped("a3", "a", 2))
		g := snapshotRestore(t, h.f)
		if got := g.ActiveWorkerIDs("a"); !slices.Equal(got, []string{"a1", "a3"}) {
			t.Fatalf("restored active ids %v, want [a1 a3]", got)
		}
		h.f = g
		h.reject(registerCapped("a4", "a", 2), fsm.ErrTooManyWorkers)
		checkWorkerCounts(t, g)
	})
	t.Run("AHeartbeatBringsAnOfflineWorkerBack", func(t *testing.T) {
		h := setup(t)
		w := h.ok(registerCapped("a1", "a", 1)).Worker
		h.at(time.Minute).ok(offline("a1", w.LastHeartbeat))
		h.ok(registerCapped("a2", "a", 1))
		hb := workerHeartbeat("a1", ttl)
		hb.WorkerHeartbeat.Token = "a"
		h.at(2 * time.Minute).ok(hb) // an id it holds: heard from, active again
		checkWorkerCounts(t, h.f)
		if got := h.f.ActiveWorkerIDs("a"); len(got) != 2 {
			t.Fatalf("active ids %v, want both", got)
		}
		h.reject(registerCapped("a3", "a", 2), fsm.ErrTooManyWorkers)
	})
	t.Run("WithoutTokensOneBucket", func(t *testing.T) {
		h := setup(t)
		h.ok(registerCapped("w1", "", 2))
		h.ok(registerCapped("w2", "", 2))
		h.reject(registerCapped("w3", "", 2), fsm.ErrTooManyWorkers)
		h.ok(registerCapped("w1", "", 2))
		checkWorkerCounts(t, h.f)
	})
	t.Run("ATakeOverCountsForTheNewToken", func(t *testing.T) {
		h := setup(t)
		w := h.ok(registerCapped("x", "b", 1)).Worker
		h.ok(registerCapped("a1", "a", 1))
		h.at(time.Minute).ok(offline("x", w.LastHeartbeat))
		h.reject(registerCapped("x", "a", 1), fsm.ErrTooManyWorkers) // a is full
		h.ok(registerCapped("x", "b", 1))                            // b takes its own id back
		checkWorkerCounts(t, h.f)
	})
}

func TestWorkerCapEncoding(t *testing.T) {
	cmds := []fsm.Cmd{
		registerCapped("w", "", 5),
		registerCapped("w", "tok", 5),
		claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, MaxWorkers: 7}),
		claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Token: "t", Fenced: true, Seq: 3, Fair: true, MaxWorkers: 7}),
	}
	for _, c := range cmds {
		if got := c.Protocol(); got != fsm.ProtocolWorkerCap {
			t.Errorf("%s: protocol %d, want %d", c.Op, got, fsm.ProtocolWorkerCap)
		}
		e := &fsm.Entry{Now: 1, Cmds: []fsm.Cmd{c}}
		if got := mustDecode(t, mustEncode(t, e)); !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip = %s\nwant %s", c.Op, dump(got), dump(e))
		}
	}
	// The bytes TestProtocol3BinaryWorkerCap gives a protocol 3 binary.
	e := mustDecode(t, []byte("\x02\x02\x01\x13\x01w\x00\x00\x00\x00\x02\x00\x00\x00\x00\x0a"))
	if c := e.Cmds[0].Claim; c == nil || c.WorkerID != "w" || c.MaxWorkers != 5 {
		t.Errorf("op code 19 read as %s", dump(e))
	}
	// Without a cap, the bytes of protocol 3.
	plain := register(store.Worker{ID: "w"})
	if plain.Protocol() != 1 {
		t.Errorf("an uncapped register's protocol is %d", plain.Protocol())
	}
	b := mustEncode(t, &fsm.Entry{Now: 1, Cmds: []fsm.Cmd{claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Fair: true})}})
	if b[3] != 12 {
		t.Errorf("an uncapped fair claim has op code %d, want 12", b[3])
	}
}
