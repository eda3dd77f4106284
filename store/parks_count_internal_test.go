package store

import (
	"fmt"
	"testing"
)

// TestParkCounts: the parked jobs by kind, kept as parks are put, replaced
// and deleted; what is not a park (a child's parent, an event consumed)
// is not counted; Verify finds totals that do not match the parks.
func TestParkCounts(t *testing.T) {
	st := openInternal(t)
	err := st.Update(func(tx *Tx) error {
		for i, kind := range []string{StepSleep, StepWait, StepWait, StepInvoke} {
			p := &Park{Kind: kind, Step: "s", WakeAt: 5}
			if kind == StepWait {
				p.Chan = &Channel{Name: "paid", Key: "o-1"}
			}
			if err := tx.PutPark(fmt.Sprintf("job-%d", i), p); err != nil {
				return err
			}
		}
		if err := tx.PutChild("job-9", "job-3", "s"); err != nil {
			return err
		}
		return tx.SetConsumed("job-1", Channel{Name: "paid", Key: "o-1"}, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	counts := func() string {
		t.Helper()
		var got string
		_ = st.View(func(tx *Tx) error {
			got = fmt.Sprint(tx.ParkCounts())
			if err := tx.checkParks(); err != nil {
				t.Errorf("checkParks: %v", err)
			}
			return nil
		})
		return got
	}
	if got := counts(); got != "map[invoke:1 sleep:1 wait:2]" {
		t.Errorf("ParkCounts() = %v; want 1 sleep, 2 waits, 1 invoke", got)
	}
	err = st.Update(func(tx *Tx) error {
		if err := tx.PutPark("job-0", &Park{Kind: StepWait, Step: "s2"}); err != nil { // a sleep re-parked on a wait
			return err
		}
		if err := tx.DeletePark("job-3"); err != nil {
			return err
		}
		return tx.DeletePark("job-never-parked")
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(); got != "map[wait:3]" {
		t.Errorf("ParkCounts() after a re-park and a delete = %v; want 3 waits", got)
	}
	err = st.Update(func(tx *Tx) error { return tx.addParked(StepSleep, 2) }) // a total the parks do not hold
	if err != nil {
		t.Fatal(err)
	}
	_ = st.View(func(tx *Tx) error {
		if err := tx.checkParks(); err == nil {
			t.Error("checkParks passed totals of 2 sleeps the parks do not hold")
		}
		return nil
	})
}
