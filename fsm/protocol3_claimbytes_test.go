//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
)

// A binary built with the workron_protocol3 tag is the release before a
// claim's byte budget: it does not write a claim with MaxBytes, and stops
// at one (op code 20) rather than lease every job it picks. Run
// with go test -tags workron_protocol3 -run TestProtocol3 ./fsm/.
func TestProtocol3BinaryClaimBytes(t *testing.T) {
	claim := fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", LeaseTTL: 1, MaxBytes: 1 << 20}}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{claim}}); err == nil {
		t.Error("Encode wrote a claim with MaxBytes (ProtocolClaimBytes)")
	}
	// Op code 20: a bounded claim (as the capped claim of op code 19 in
	// protocol3_workercap_test.go, then MaxBytes 1 MiB as a varint).
	data := []byte("\x02\x02\x01\x14\x01w\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x80\x80\x80\x01")
	if _, err := fsm.Decode(data); err == nil || !strings.Contains(err.Error(), "unknown op code 20") {
		t.Errorf("Decode of op code 20 (a bounded claim): %v, want it refused as unknown", err)
	}
}
