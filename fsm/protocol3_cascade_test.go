//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// TestProtocol3BinaryRefusesChunkedCascades checks that a binary of
// protocol 3 (the workron_protocol3 tag) neither writes nor reads the ops
// of cascades in chunks: it stops at them rather than cascade in one entry
// what its protocol-4 peers cascade in chunks. Run with go test -tags
// workron_protocol3 -run TestProtocol3 ./fsm/.
func TestProtocol3BinaryRefusesChunkedCascades(t *testing.T) {
	if fsm.ProtocolVersion != 3 {
		t.Fatalf("ProtocolVersion = %d with the workron_protocol3 tag", fsm.ProtocolVersion)
	}
	for name, c := range map[string]fsm.Cmd{
		"CancelChunked":   {Op: fsm.OpCancelChunked, Cancel: &fsm.Cancel{JobID: "job-1", Cascade: true}},
		"ContinueCascade": {Op: fsm.OpContinueCascade, ContinueCascade: &fsm.ContinueCascade{ID: 1}},
		"ReportChunked":   report(fsm.Report{JobID: "job-1", Error: "boom", Chunked: true}),
		"ExpireChunked":   {Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: "job-1", Lease: 3, Chunked: true}},
	} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
			t.Errorf("%s: Encode wrote it", name)
		}
	}
	for _, data := range cascadeEntries {
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", data)
		}
	}
}
