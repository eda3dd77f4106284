//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// TestProtocol3Steps checks that a binary of protocol 3 (the
// workron_protocol3 tag) neither writes nor reads op record_step
// (ProtocolSteps).
func TestProtocol3Steps(t *testing.T) {
	if fsm.ProtocolVersion != 3 {
		t.Fatalf("ProtocolVersion = %d with the workron_protocol3 tag", fsm.ProtocolVersion)
	}
	c := fsm.Cmd{Op: fsm.OpRecordStep, RecordStep: &fsm.RecordStep{JobID: "order-1", Lease: 1, Key: "a"}}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
		t.Error("Encode wrote a record_step")
	}
	data := []byte("\x02\x02\x01\x00" + withLen(`{"op":"record_step","step":{"job":"order-1","lease":1,"key":"a"}}`))
	if _, err := fsm.Decode(data); err == nil {
		t.Errorf("Decode of %q: accepted, want it refused", data)
	}
}
