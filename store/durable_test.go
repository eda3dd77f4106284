package store_test

import (
	"errors"
	"testing"

	"github.com/workron/workron/store"
)

// TestDurableRecords: kept events expire oldest first with their totals
// right, waiters are counted, and deleting a job removes its park, wait,
// child link and consumed events.
func TestDurableRecords(t *testing.T) {
	st := newTestStore(t)
	jobs := insertJobs(t, st, 2, store.StatusDone)
	ch := store.Channel{Name: "paid", Key: "o1"}
	sig := store.Channel{Signal: true, Name: "go", Key: jobs[0].ID}
	update(t, st, func(tx *store.Tx) error {
		for i, c := range []store.Channel{ch, sig, ch} {
			if err := tx.PutEvent(&store.Event{Chan: c, At: int64(10 * (i + 1)), Payload: []byte("12345")}); err != nil {
				return err
			}
		}
		if n, err := tx.ExpireEvents(21, 10); err != nil || n != 2 {
			t.Errorf("expired %d, %v; want 2", n, err)
		}
		if tot := tx.EventTotals(); tot.Count != 1 || tot.LastSeq != 3 || tot.Bytes != store.EventBytes(ch, []byte("12345")) {
			t.Errorf("totals %+v", tot)
		}
		if ev, err := tx.FirstEvent(ch, 0, 0); err != nil || ev.Seq != 3 {
			t.Errorf("first event %+v, %v; want seq 3", ev, err)
		}
		if _, err := tx.FirstEvent(ch, 3, 0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an event after the last: %v", err)
		}
		for _, j := range jobs {
			if err := tx.PutWaiter(ch, j.ID, "w"); err != nil {
				return err
			}
		}
		if err := tx.PutWaiter(ch, jobs[0].ID, "w"); err != nil {
			return err
		}
		if n := tx.Waiters(ch); n != 2 {
			t.Errorf("waiters %d, want 2", n)
		}
		if err := tx.PutPark(jobs[0].ID, &store.Park{Kind: store.StepWait, Step: "w", Chan: &ch}); err != nil {
			return err
		}
		if err := tx.PutChild(jobs[0].ID, jobs[1].ID, "kid"); err != nil {
			return err
		}
		if err := tx.SetConsumed(jobs[0].ID, ch, 3); err != nil {
			return err
		}
		return tx.DeleteJob(jobs[0])
	})
	if err := st.View(func(tx *store.Tx) error {
		if _, err := tx.Park(jobs[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("park after delete: %v", err)
		}
		if _, _, ok := tx.ChildOf(jobs[0].ID); ok {
			t.Error("child link after delete")
		}
		if tx.Consumed(jobs[0].ID, ch) != 0 {
			t.Error("consumed after delete")
		}
		if w := tx.WaitersOf(ch, 10); tx.Waiters(ch) != 1 || len(w) != 1 || w[0].JobID != jobs[1].ID {
			t.Errorf("waiters after delete %+v", w)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
