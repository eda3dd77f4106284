//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestClaimByteBudget: a claim with MaxBytes takes jobs until they reach
// the budget, always at least one; the jobs it did not take stay pending,
// never leased, and the next claim takes them. A claim without MaxBytes
// (protocol 3's) takes as many as Max says.
func TestClaimByteBudget(t *testing.T) {
	big := `"` + strings.Repeat("x", 100<<10) + `"` // a 100 KiB payload
	setup := func(t *testing.T, n int) *harness {
		h := setup(t)
		var jobs []fsm.NewJob
		for range n {
			jobs = append(jobs, fsm.NewJob{Type: "big", Payload: []byte(big), MaxAttempts: 1})
		}
		h.submit(jobs...)
		return h
	}
	count := func(h *harness, st store.Status) int {
		n := 0
		for _, j := range allJobs(t, h.f) {
			if j.Status == st {
				n++
			}
		}
		return n
	}

	t.Run("StopsAtTheBudgetAndLeavesTheRestPending", func(t *testing.T) {
		h := setup(t, 10)
		got := h.claim(fsm.Claim{WorkerID: "w", Types: []string{"big"}, Max: 10, MaxBytes: 350 << 10})
		if len(got) != 3 {
			t.Fatalf("claimed %d jobs of 100 KiB within 350 KiB, want 3", len(got))
		}
		if running, pending := count(h, store.StatusRunning), count(h, store.StatusPending); running != 3 || pending != 7 {
			t.Fatalf("%d running and %d pending after the claim, want 3 and 7", running, pending)
		}
		for range 3 {
			h.claim(fsm.Claim{WorkerID: "w", Types: []string{"big"}, Max: 10, MaxBytes: 350 << 10})
		}
		if pending := count(h, store.StatusPending); pending != 0 {
			t.Fatalf("%d jobs still pending after four claims, want 0", pending)
		}
		checkIndexes(t, h.f)
	})
	t.Run("AlwaysAtLeastOne", func(t *testing.T) {
		h := setup(t, 2)
		if got := h.claim(fsm.Claim{WorkerID: "w", Types: []string{"big"}, Max: 2, MaxBytes: 1}); len(got) != 1 {
			t.Fatalf("claimed %d jobs within a budget below one job, want 1", len(got))
		}
	})
	t.Run("WithoutABudgetMaxAlone", func(t *testing.T) {
		h := setup(t, 10)
		if got := h.claim(fsm.Claim{WorkerID: "w", Types: []string{"big"}, Max: 10}); len(got) != 10 {
			t.Fatalf("claimed %d jobs without a budget, want 10", len(got))
		}
	})
	t.Run("IsProtocol4AndRoundTrips", func(t *testing.T) {
		for _, ack := range []bool{false, true} {
			c := fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", LeaseTTL: 1, MaxBytes: 1, Ack: ack}}
			if p := c.Protocol(); p != fsm.ProtocolClaimBytes {
				t.Fatalf("a claim with MaxBytes is protocol %d, want %d", p, fsm.ProtocolClaimBytes)
			}
			b, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}})
			if err != nil {
				t.Fatal(err)
			}
			e, err := fsm.Decode(b)
			if err != nil || e.Cmds[0].Op != fsm.OpClaim || e.Cmds[0].Claim.MaxBytes != 1 || e.Cmds[0].Claim.Ack != ack {
				t.Fatalf("Decode(Encode(bounded claim, ack %v)) = %+v, %v", ack, e, err)
			}
		}
	})
}
