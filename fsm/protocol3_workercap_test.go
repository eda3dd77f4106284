//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/binenc"
	"github.com/workron/workron/store"
)

// A binary built with the workron_protocol3 tag is the release before the
// cap on a token's worker ids: it does not write a register or claim that
// carries MaxWorkers, and stops at one rather than apply it uncapped. Run
// with go test -tags workron_protocol3 -run TestProtocol3 ./fsm/.
func TestProtocol3BinaryWorkerCap(t *testing.T) {
	reg := fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "w"}, Token: "a", MaxWorkers: 5}}
	claim := fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", LeaseTTL: 1, MaxWorkers: 5}}
	for _, c := range []fsm.Cmd{reg, claim} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
			t.Errorf("Encode wrote a %s with MaxWorkers (ProtocolWorkerCap)", c.Op)
		}
	}
	// Op code 19: a capped claim (worker "w", no lists, shell false, max 0,
	// ttl 1, token "", fenced false, seq 0, fair false, cap 5).
	if _, err := fsm.Decode([]byte("\x02\x02\x01\x13\x01w\x00\x00\x00\x00\x02\x00\x00\x00\x00\x0a")); err == nil || !strings.Contains(err.Error(), "unknown op code 19") {
		t.Errorf("Decode of op code 19 (a capped claim): %v, want it refused as unknown", err)
	}
	js := `{"op":"register_capped","register":{"worker":{"id":"w","reg":0,"hb":0,"mod":0},"max_workers":5}}`
	data := binenc.AppendBytes([]byte{fsm.EncodingVersion, 0, 1, 0}, []byte(js))
	if _, err := fsm.Decode(data); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("Decode of %s: %v, want it refused as unknown", js, err)
	}
	// The same register without its cap is protocol 3's, and read.
	plain := fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "w"}, Token: "a"}}
	b, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{plain}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsm.Decode(b); err != nil {
		t.Errorf("Decode refused a register of protocol 3: %v", err)
	}
}
