//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// TestProtocol3RefusesClaimAck checks that a binary of protocol 3 neither
// writes nor reads a claim whose attempts await acknowledgement (op code
// 23): it would apply their expiry by the old rule, and its state would
// part from its peers'.
func TestProtocol3RefusesClaimAck(t *testing.T) {
	c := claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 1, Ack: true})
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
		t.Error("Encode wrote a claim with Ack")
	}
	if _, err := fsm.Decode(claimAckEntry); err == nil {
		t.Errorf("Decode of %q: accepted, want it refused", claimAckEntry)
	}
	// The same claim without Ack is one it applies.
	if _, err := fsm.Decode([]byte("\x02\x00\x01\x02\x01w\x00\x00\x00\x00\x02")); err != nil {
		t.Errorf("Decode of the claim without op code 23: %v", err)
	}
}
