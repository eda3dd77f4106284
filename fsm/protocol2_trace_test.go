//go:build workron_protocol2 && !workron_protocol1

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// A binary built with the workron_protocol2 tag is the release before
// traces: it does not write a traced submit, and stops at one. Run with
// go test -tags workron_protocol2 -run TestProtocol2 ./fsm/.
func TestProtocol2BinaryTraces(t *testing.T) {
	traced := submit(fsm.NewJob{Command: "x", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{traced}}); err == nil {
		t.Error("Encode wrote a submit with a trace (ProtocolTrace)")
	}
	if _, err := fsm.Decode([]byte("\x02\x02\x01\x0f\x00")); err == nil { // op code 15, a traced submit of no jobs
		t.Error("Decode accepted op code 15 (a traced submit)")
	}
	if _, err := fsm.Decode([]byte("\x02\x02\x01\x0b\x00")); err != nil { // op code 11, a keyed submit
		t.Errorf("Decode refused op code 11 (protocol 2): %v", err)
	}
}
