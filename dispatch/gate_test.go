package dispatch

import "testing"

func TestGate(t *testing.T) {
	t.Run("LetsOutOnlyAsManyClaimsAsJobs", func(t *testing.T) {
		var g Gate
		for i := 0; i < 2; i++ {
			if !g.Acquire(2) {
				t.Fatalf("two jobs ready: claim %d must go out", i+1)
			}
		}
		if g.Acquire(2) {
			t.Fatal("a third claim went out for two jobs")
		}
		finished := g.Finished()
		if !g.Watched() {
			t.Fatal("a poll holds Finished's channel, but the gate says none is watched")
		}
		g.Release()
		select {
		case <-finished:
		default:
			t.Fatal("waiters were not woken when a claim finished")
		}
		if g.Watched() {
			t.Fatal("Finished's channel closed, but the gate says it is still watched")
		}
		if !g.Acquire(2) {
			t.Fatal("a freed slot was not reusable")
		}
	})

	t.Run("NothingReadyLetsNothingOut", func(t *testing.T) {
		var g Gate
		if g.Acquire(0) {
			t.Fatal("a claim went out with no job ready")
		}
	})
}
