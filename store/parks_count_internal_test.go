package store

import (
	"fmt"
	"testing"
)

// TestParkCounts: the parked jobs by kind, a walk bounded by its limit;
// what is not a park (a child's parent, an event consumed) is not counted.
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
	_ = st.View(func(tx *Tx) error {
		if got, complete := tx.ParkCounts(10); !complete || fmt.Sprint(got) != "map[invoke:1 sleep:1 wait:2]" {
			t.Errorf("ParkCounts(10) = %v, %v; want 1 sleep, 2 waits, 1 invoke, complete", got, complete)
		}
		if got, complete := tx.ParkCounts(3); complete || len(got) == 0 {
			t.Errorf("ParkCounts(3) = %v, %v; want part of them, not complete", got, complete)
		}
		return nil
	})
}
