//go:build workron_protocol2 && !workron_protocol1

package fsm_test

import (
	"testing"

	"github.com/workron/workron/fsm"
)

// A binary built with the workron_protocol2 tag is the release before
// bucket pruning: it does not write prune_buckets, and stops at one. Run
// with go test -tags workron_protocol2 -run TestProtocol2 ./fsm/.
func TestProtocol2BinaryPruneBuckets(t *testing.T) {
	c := fsm.Cmd{Op: fsm.OpPruneBuckets, PruneBuckets: &fsm.PruneBuckets{Limit: 1}}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
		t.Error("Encode wrote prune_buckets (protocol 3)")
	}
	if _, err := fsm.Decode(pruneEntry); err == nil {
		t.Errorf("Decode of %q: accepted, want it refused", pruneEntry)
	}
}
