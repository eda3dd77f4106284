//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// TestProtocol3DeleteKept checks that a binary of protocol 3 neither
// writes nor reads a delete_kept (ProtocolKeepFailed), which it would
// otherwise apply as a plain delete and remove failed jobs its peers keep.
func TestProtocol3DeleteKept(t *testing.T) {
	c := fsm.Cmd{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: []string{"job-1"}, KeepFailed: 1}}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
		t.Error("Encode wrote a delete_kept")
	}
	data := []byte("\x02\x02\x01\x00" + withLen(`{"op":"delete_kept","delete":{"ids":["job-1"],"keep_failed":1}}`))
	if _, err := fsm.Decode(data); err == nil {
		t.Errorf("Decode of %q: accepted, want it refused", data)
	}
}
