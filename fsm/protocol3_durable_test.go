//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// TestProtocol3Durable checks that a binary of protocol 3 (the
// workron_protocol3 tag) neither writes nor reads the ops of sleeps,
// waits, invokes and events (ProtocolDurable).
func TestProtocol3Durable(t *testing.T) {
	for _, c := range []struct {
		cmd  fsm.Cmd
		json string
	}{
		{fsm.Cmd{Op: fsm.OpSleepStep, SleepStep: &fsm.SleepStep{JobID: "j", Lease: 1, Key: "a", For: 1}},
			`{"op":"sleep_step","sleep":{"job":"j","lease":1,"key":"a","for":1}}`},
		{fsm.Cmd{Op: fsm.OpWaitStep, WaitStep: &fsm.WaitStep{JobID: "j", Lease: 1, Key: "a", Event: "e"}},
			`{"op":"wait_step","wait":{"job":"j","lease":1,"key":"a","event":"e"}}`},
		{fsm.Cmd{Op: fsm.OpInvokeStep, InvokeStep: &fsm.InvokeStep{JobID: "j", Lease: 1, Key: "a", Child: fsm.NewJob{Command: "c"}}},
			`{"op":"invoke_step","invoke":{"job":"j","lease":1,"key":"a","child":{"cmd":"c","backoff":{}}}}`},
		{fsm.Cmd{Op: fsm.OpSendEvent, SendEvent: &fsm.SendEvent{Name: "e", Key: "k"}},
			`{"op":"send_event","event":{"name":"e","key":"k"}}`},
	} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c.cmd}}); err == nil {
			t.Errorf("Encode wrote a %s", c.cmd.Op)
		}
		data := []byte("\x02\x02\x01\x00" + withLen(c.json))
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", data)
		}
	}
}
