package api

import "testing"

func TestClaimGate(t *testing.T) {
	t.Run("LetsOutOnlyAsManyClaimsAsJobs", func(t *testing.T) {
		var s Server
		g := &s.claiming
		if !g.acquire(2) || !g.acquire(2) {
			t.Fatal("two jobs ready: the first two claims must go out")
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
