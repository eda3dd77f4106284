//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/binenc"
)

// A binary built with the workron_protocol3 tag is the release before a
// claim's byte budget: it does not write a claim with MaxBytes, and stops
// at one (op name claim_bounded) rather than lease every job it picks. Run
// with go test -tags workron_protocol3 -run TestProtocol3 ./fsm/.
func TestProtocol3BinaryClaimBytes(t *testing.T) {
	claim := fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", LeaseTTL: 1, MaxBytes: 1 << 20}}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{claim}}); err == nil {
		t.Error("Encode wrote a claim with MaxBytes (ProtocolClaimBytes)")
	}
	js := `{"op":"claim_bounded","claim":{"worker":"w","ttl":1,"max_bytes":1048576}}`
	data := binenc.AppendBytes([]byte{fsm.EncodingVersion, 0, 1, 0}, []byte(js))
	if _, err := fsm.Decode(data); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("Decode of %s: %v, want it refused as unknown", js, err)
	}
}
