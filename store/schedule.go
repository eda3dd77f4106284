package store

import (
	"encoding/json"
	"fmt"
)

var bucketSchedules = []byte("schedules") // name -> Schedule

// Schedule is the stored record of a cron schedule. Times are Unix
// nanoseconds. The store keeps the job template as opaque JSON; the fsm
// package owns its shape.
type Schedule struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron"`
	Timezone string          `json:"tz,omitempty"`
	Job      json.RawMessage `json:"job"`
	Overlap  string          `json:"overlap"`
	Catchup  string          `json:"catchup"`
	Paused   bool            `json:"paused,omitempty"`

	CreatedAt int64 `json:"created"`
	UpdatedAt int64 `json:"updated"`
	// LastTick is the latest tick accounted for (run, skipped or missed);
	// ticks at or before it never run.
	LastTick int64 `json:"last_tick"`
	// LastRun is the scheduled_for of the latest job created (a tick, or
	// the time of a manual trigger), and LastJobID that job's id.
	LastRun   int64  `json:"last_run,omitempty"`
	LastJobID string `json:"last_job,omitempty"`
	// LastError says why the latest tick created no job, if it did not.
	LastError string `json:"last_err,omitempty"`
	Runs      uint64 `json:"runs,omitempty"`
	Skipped   uint64 `json:"skipped,omitempty"` // ticks not run: the previous run was unfinished
	Missed    uint64 `json:"missed,omitempty"`  // ticks not run: missed beyond the catch-up

	ModifyIndex uint64 `json:"mod"`
}

// Schedule returns the schedule with the given name, or ErrNotFound.
func (t *Tx) Schedule(name string) (*Schedule, error) {
	v := t.tx.Bucket(bucketSchedules).Get([]byte(name))
	if v == nil {
		return nil, ErrNotFound
	}
	s := new(Schedule)
	if err := decodeJSON(v, s); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", name, err)
	}
	return s, nil
}

// PutSchedule stores (creates or replaces) a schedule.
func (t *Tx) PutSchedule(s *Schedule, index uint64) error {
	s.ModifyIndex = index
	v, err := encodeJSON(s)
	if err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketSchedules).Put([]byte(s.Name), v); err != nil {
		return fmt.Errorf("put schedule %s: %w", s.Name, err)
	}
	return nil
}

// DeleteSchedule removes a schedule; its jobs stay.
func (t *Tx) DeleteSchedule(name string) error {
	if err := t.tx.Bucket(bucketSchedules).Delete([]byte(name)); err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	return nil
}

// ForEachSchedule calls fn for each schedule in name order. fn must not
// modify the store.
func (t *Tx) ForEachSchedule(fn func(*Schedule) error) error {
	return t.tx.Bucket(bucketSchedules).ForEach(func(k, v []byte) error {
		s := new(Schedule)
		if err := decodeJSON(v, s); err != nil {
			return fmt.Errorf("schedule %s: %w", k, err)
		}
		return fn(s)
	})
}

// ForEachScheduleName calls fn with each schedule's name in name order,
// without decoding the schedules, until fn returns false.
func (t *Tx) ForEachScheduleName(fn func(name string) bool) error {
	c := t.tx.Bucket(bucketSchedules).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if !fn(string(k)) {
			break
		}
	}
	return nil
}

// SchedulesAfter returns up to limit schedules whose names sort after
// after ("" from the first), in name order, and whether more follow them.
func (t *Tx) SchedulesAfter(after string, limit int) ([]*Schedule, bool, error) {
	return pageAfter[Schedule](t.tx.Bucket(bucketSchedules), "schedule", after, limit)
}
