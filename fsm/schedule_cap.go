package fsm

import "fmt"

// A cap on the number of schedules (ProtocolScheduleCap). The leader's
// scheduler reads every schedule on each pass, so their number is bounded:
// a put_schedule that creates one carries the cap, MaxSchedules, and the
// FSM refuses the create once the cluster holds that many
// (TooManySchedulesError). The cap travels in the entry, written under op
// name putScheduleCapped, so that a node of an older protocol stops at it
// rather than create what its peers refuse.

// ProtocolScheduleCap is the protocol of a PutSchedule's MaxSchedules.
const ProtocolScheduleCap = 4

// MaxSchedules is the most schedules a cluster holds: the API sets it on
// every create once the cluster runs ProtocolScheduleCap.
const MaxSchedules = 10_000

// putScheduleCapped is the op name Encode writes a put_schedule whose
// MaxSchedules is set under.
const putScheduleCapped Op = "put_schedule_capped"

// TooManySchedulesError refuses a schedule's creation: the cluster holds
// Max schedules already.
type TooManySchedulesError struct {
	Name string
	Max  int
}

func (e *TooManySchedulesError) Error() string {
	return fmt.Sprintf("schedule %s was not created: the cluster holds max_schedules = %d schedules; delete one first", e.Name, e.Max)
}

// scheduleCapped reports whether c is a put_schedule with a cap.
func (c *Cmd) scheduleCapped() bool {
	return c.Op == OpPutSchedule && c.PutSchedule != nil && c.PutSchedule.MaxSchedules != 0
}

// putScheduleCmd reads a put_schedule written under either name back as
// OpPutSchedule, and refuses a cap under the plain name (an older node
// would drop it) or the new name without one.
func (r *entryReader) putScheduleCmd(c *Cmd) {
	name := c.Op
	c.Op = OpPutSchedule
	switch {
	case c.PutSchedule == nil:
		return // Cmd.valid refuses it
	case name == OpPutSchedule && c.scheduleCapped():
		r.Fail(fmt.Sprintf("op %q with max_schedules, not written under %q", name, putScheduleCapped))
	case name == putScheduleCapped && !c.scheduleCapped():
		r.Fail(fmt.Sprintf("op %q without max_schedules", name))
	}
}

// scheduleRoom refuses p's create when the cluster holds p.MaxSchedules
// schedules: it counts at most that many.
func (a *applier) scheduleRoom(p *PutSchedule) error {
	if p.MaxSchedules <= 0 {
		return nil
	}
	n := 0
	err := a.tx.ForEachScheduleName(func(string) bool {
		n++
		return n < p.MaxSchedules
	})
	a.must(err)
	if n >= p.MaxSchedules {
		return &TooManySchedulesError{Name: p.Name, Max: p.MaxSchedules}
	}
	return nil
}
