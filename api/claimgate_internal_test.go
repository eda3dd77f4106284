package api

import "testing"

func TestClaimGate(t *testing.T) {
	t.Run("LetsOutOnlyAsManyClaimsAsJobs", func(t *testing.T) {
		var s Server
		g := &s.claiming
		for i := 0; i < 2; i++ {
			if !g.acquire(2) {
				t.Fatalf("two jobs ready: claim %d must go out", i+1)
			}
		}
		if g.acquire(2) {
			t.Fatal("a third claim went out for two jobs")
		}
		finished := s.claimsFinished()
		g.release()
		select {
		case <-finished:
		default:
			t.Fatal("waiters were not woken when a claim finished")
		}
		if !g.acquire(2) {
			t.Fatal("a freed slot was not reusable")
		}
	})

	t.Run("NothingReadyLetsNothingOut", func(t *testing.T) {
		var g claimGate
		if g.acquire(0) {
			t.Fatal("a claim went out with no job ready")
		}
	})
}
