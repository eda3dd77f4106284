//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestProtocol3PauseBounds checks that a binary of protocol 3 (the
// workron_protocol3 tag) neither writes nor reads the forms of
// ProtocolPauses: a capped report (op code 17), a set_queue_limits with
// pause settings, and lift_pauses.
func TestProtocol3PauseBounds(t *testing.T) {
	if fsm.ProtocolVersion != 3 {
		t.Fatalf("ProtocolVersion = %d with the workron_protocol3 tag", fsm.ProtocolVersion)
	}
	for name, c := range map[string]fsm.Cmd{
		"CappedReport": report(fsm.Report{JobID: "job-1", SnoozeFor: 1, Capped: true}),
		"PauseQueue":   setLimits("q", store.QueueLimits{PauseQueue: true}),
		"MaxPause":     setLimits("q", store.QueueLimits{MaxPause: 1}),
		"LiftPauses":   {Op: fsm.OpLiftPauses, LiftPauses: &fsm.LiftPauses{Queue: "q", All: true}},
	} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
			t.Errorf("%s: Encode wrote it", name)
		}
	}
	for _, data := range protocol4PauseEntries {
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", data)
		}
	}
}
