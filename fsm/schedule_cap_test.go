//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
)

// TestScheduleCap checks the cap a create carries (ProtocolScheduleCap):
// a create past it is refused with TooManySchedulesError and creates
// nothing; updates of existing schedules go on; a delete makes room.
func TestScheduleCap(t *testing.T) {
	h := setup(t)
	capped := func(name string) fsm.Cmd {
		return putSchedule(fsm.PutSchedule{Name: name, Create: true, MaxSchedules: 2})
	}
	h.ok(capped("a"))
	h.ok(capped("b"))
	r := h.one(capped("c"))
	var tm *fsm.TooManySchedulesError
	if !errors.As(r.Err, &tm) || tm.Max != 2 || !strings.Contains(r.Err.Error(), "max_schedules") {
		t.Fatalf("third create: %v, want TooManySchedulesError naming max_schedules = 2", r.Err)
	}
	if _, err := h.f.Schedule("c"); !errors.Is(err, fsm.ErrScheduleNotFound) {
		t.Fatalf("schedule c after its refused create: %v, want not found", err)
	}
	h.ok(putSchedule(fsm.PutSchedule{Name: "a", Cron: "@every 2m"})) // an update needs no room
	h.ok(fsm.Cmd{Op: fsm.OpDeleteSchedule, DeleteSchedule: &fsm.DeleteSchedule{Name: "b"}})
	h.ok(capped("c"))
	if c := capped("d"); c.Protocol() != fsm.ProtocolScheduleCap {
		t.Errorf("a capped create needs protocol %d, want %d", c.Protocol(), fsm.ProtocolScheduleCap)
	}
	if c := createSchedule("d", fsm.OverlapAllow); c.Protocol() >= fsm.ProtocolScheduleCap {
		t.Errorf("an uncapped create needs protocol %d", c.Protocol())
	}
}

// TestScheduleCapEncoding: a capped put_schedule is written under its own
// op name, and read back only under it.
func TestScheduleCapEncoding(t *testing.T) {
	c := putSchedule(fsm.PutSchedule{Name: "a", Create: true, MaxSchedules: 5})
	data, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"put_schedule_capped"`) {
		t.Errorf("encoded %q, want op put_schedule_capped", data)
	}
	e, err := fsm.Decode(data)
	if err != nil || len(e.Cmds) != 1 || e.Cmds[0].Op != fsm.OpPutSchedule || e.Cmds[0].PutSchedule.MaxSchedules != 5 {
		t.Fatalf("decoded %+v, %v; want the put_schedule with its cap", e, err)
	}
	for _, body := range []string{
		`{"op":"put_schedule","put_sched":{"name":"a","cron":"@daily","job":{"command":"x"},"overlap":"allow","catchup":"one","create":true,"max":5}}`,
		`{"op":"put_schedule_capped","put_sched":{"name":"a","cron":"@daily","job":{"command":"x"},"overlap":"allow","catchup":"one","create":true}}`,
	} {
		data := []byte("\x02\x02\x01\x00" + withLen(body))
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", body)
		}
	}
}
