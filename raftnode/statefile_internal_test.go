package raftnode

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// planCheck checks first exactly where damage is possible or its absence
// unknown, and otherwise in the background.
func TestPlanCheck(t *testing.T) {
	for _, tc := range []struct {
		name              string
		asked             bool
		marker            string // the check marker's content, "" for none
		crashed, rebooted bool
		first             bool
	}{
		{name: "ClosedCleanly"},
		{name: "ProcessCrash", crashed: true},
		{name: "Reboot", crashed: true, rebooted: true, first: true},
		{name: "Asked", asked: true, first: true},
		{name: "CheckDidNotEnd", marker: checkRunning, first: true},
		{name: "CheckFoundDamage", marker: "damaged: page 7", first: true},
		{name: "CheckStoppedByAShutdown", marker: checkStoppedEarly},
		{name: "CheckStoppedThenAReboot", marker: checkStoppedEarly, crashed: true, rebooted: true, first: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if tc.marker != "" {
				if err := os.WriteFile(checkMarker(path), []byte(tc.marker), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			n := &Node{logger: slog.New(slog.DiscardHandler)}
			if tc.asked {
				n.cfg.StateCheck = StateCheckStart
			}
			p := n.planCheck(path, tc.crashed, tc.rebooted)
			if p.first != tc.first || p.why == "" {
				t.Fatalf("planCheck = %+v, want first=%v and a reason", p, tc.first)
			}
		})
	}
}
