//go:build workron_protocol2 && !workron_protocol1

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestProtocol2Binary checks that a binary of protocol 2 (the
// workron_protocol2 tag) neither writes nor reads the fields of protocol 3
// this package adds for flow control: fair claims, queue key weights and a
// report's backpressure.
func TestProtocol2Binary(t *testing.T) {
	if fsm.ProtocolVersion != 2 {
		t.Fatalf("ProtocolVersion = %d with the workron_protocol2 tag", fsm.ProtocolVersion)
	}
	for name, c := range map[string]fsm.Cmd{
		"FairClaim":   claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Fair: true}),
		"KeyWeights":  setLimits("q", store.QueueLimits{KeyWeights: map[string]int{"a": 2}}),
		"RateLimited": report(fsm.Report{JobID: "job-1", RateLimitedFor: 1}),
		"Snooze":      report(fsm.Report{JobID: "job-1", SnoozeFor: 1}),
	} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
			t.Errorf("%s: Encode wrote it", name)
		}
	}
	for _, data := range protocol3Entries {
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", data)
		}
	}
}
