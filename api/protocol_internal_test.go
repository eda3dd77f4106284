package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// A command refused for its protocol gets the same code in a reply of
// several outcomes (a batch of reports) as in a reply of one.
func TestErrorCodeOfANeedsUpgradeError(t *testing.T) {
	err := fmt.Errorf("report job-1: %w", &raftnode.NeedsUpgradeError{Op: fsm.OpReport, Need: 3, Cluster: 2})
	code, msg := reply(err)
	if code != "upgrade_in_progress" || !strings.Contains(msg, "every node to run protocol 3, and the cluster runs 2") {
		t.Fatalf("reply = %q, %q", code, msg)
	}
}
