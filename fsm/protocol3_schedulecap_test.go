//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// TestProtocol3ScheduleCap checks that a binary of protocol 3 neither
// writes nor reads a put_schedule_capped (ProtocolScheduleCap), which it
// would otherwise apply without the cap its peers keep.
func TestProtocol3ScheduleCap(t *testing.T) {
	c := putSchedule(fsm.PutSchedule{Name: "a", Create: true, MaxSchedules: 5})
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
		t.Error("Encode wrote a put_schedule_capped")
	}
	data := []byte("\x02\x02\x01\x00" + withLen(`{"op":"put_schedule_capped","put_sched":{"name":"a","cron":"@daily","job":{"command":"x"},"overlap":"allow","catchup":"one","create":true,"max":5}}`))
	if _, err := fsm.Decode(data); err == nil {
		t.Errorf("Decode of %q: accepted, want it refused", data)
	}
}
