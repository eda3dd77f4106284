package dispatch

import (
	"testing"
	"time"

	"github.com/workron/workron/fsm"
)

func TestWaiters(t *testing.T) {
	claim := func(queues ...string) fsm.Claim { return fsm.Claim{Queues: queues} }

	t.Run("ASubmitTakesTheLongestParkedOfItsQueue", func(t *testing.T) {
		var ws Waiters
		a, b, c := ws.Park(claim("other")), ws.Park(claim("q")), ws.Park(claim("q"))
		taken := ws.TakeFor([]fsm.NewJob{{Queue: "q"}}, 0)
		if len(taken) != 1 || taken[0] != b {
			t.Fatalf("took %v, want the first waiter parked on q", taken)
		}
		if ws.Leave(b) {
			t.Fatal("a taken waiter left as if untaken: its result would be lost")
		}
		if !ws.Leave(a) || !ws.Leave(c) || ws.Len() != 0 {
			t.Fatalf("untaken waiters could not leave; %d still parked", ws.Len())
		}
	})

	t.Run("OnlyJobsThatCanStartAtOnceTakeAWaiter", func(t *testing.T) {
		var ws Waiters
		for range 3 {
			ws.Park(claim("q"))
		}
		jobs := []fsm.NewJob{{Queue: "q", DependsOn: []string{"p"}}, {Queue: "q", RunAt: 11}, {Queue: "q", RunAt: 10}}
		if taken := ws.TakeFor(jobs, 10); len(taken) != 1 {
			t.Fatalf("took %d waiters, want 1 (one job has a dependency, one is delayed)", len(taken))
		}
	})

	t.Run("ASubmitTakesAtMostMaxHandoffs", func(t *testing.T) {
		var ws Waiters
		jobs := make([]fsm.NewJob, MaxHandoffs+5)
		for i := range jobs {
			jobs[i].Queue = "q"
			ws.Park(claim("q"))
		}
		if taken := ws.TakeFor(jobs, 0); len(taken) != MaxHandoffs {
			t.Fatalf("took %d waiters, want MaxHandoffs (%d)", len(taken), MaxHandoffs)
		}
	})

	t.Run("OnlyNumberedFencedWaitingClaimsPark", func(t *testing.T) {
		ok := fsm.Claim{Fenced: true, Seq: 1}
		cases := []struct {
			name     string
			c        fsm.Claim
			wait     bool
			anyQueue bool
			want     bool
		}{
			{"NumberedAndFenced", ok, true, false, true},
			{"NoWait", ok, false, false, false},
			{"AnyQueue", ok, true, true, false},
			{"NoLease", fsm.Claim{Seq: 1}, true, false, false},
			{"NoNumber", fsm.Claim{Fenced: true}, true, false, false},
		}
		for _, tc := range cases {
			wait := time.Duration(0)
			if tc.wait {
				wait = time.Second
			}
			if got := Parks(&tc.c, wait, tc.anyQueue); got != tc.want {
				t.Errorf("%s: Parks %v, want %v", tc.name, got, tc.want)
			}
		}
	})
}
