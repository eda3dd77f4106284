//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// TestProtocol3Bulk checks that a binary of protocol 3 (the
// workron_protocol3 tag) neither writes nor reads the ops of ProtocolBulk,
// so a node not yet upgraded stops at a bulk action's entry rather than
// skipping it and diverging.
func TestProtocol3Bulk(t *testing.T) {
	if fsm.ProtocolVersion != 3 {
		t.Fatalf("ProtocolVersion = %d with the workron_protocol3 tag", fsm.ProtocolVersion)
	}
	for name, c := range map[string]fsm.Cmd{
		"Start": {Op: fsm.OpBulkStart, BulkStart: &fsm.BulkStart{Action: fsm.BulkRetry, Selector: "status=failed"}},
		"Step":  {Op: fsm.OpBulkStep, BulkStep: &fsm.BulkStep{ID: 1, From: 9, IDs: []string{"job-3"}}},
		"Stop":  {Op: fsm.OpBulkStop, BulkStop: &fsm.BulkStop{ID: 1}},
	} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
			t.Errorf("%s: Encode wrote it", name)
		}
	}
	for _, data := range protocol4BulkEntries {
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", data)
		}
	}
}
