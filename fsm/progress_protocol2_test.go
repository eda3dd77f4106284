//go:build workron_protocol2 && !workron_protocol1

package fsm_test

import (
	"encoding/json"
	"testing"

	"github.com/workron/workron/fsm"
)

// A protocol 2 binary neither writes nor reads progress and results (op
// codes 12 and 13): it stops at them, as a release before them does. Run
// with go test -tags workron_protocol2 -run TestProtocol2Progress ./fsm/.
func TestProtocol2Progress(t *testing.T) {
	withProgress := fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{
		WorkerID: "w", LeaseTTL: 1, Listed: true, Leases: []fsm.LeaseRef{{JobID: "j", Lease: 1, Progress: &fsm.LeaseProgress{Percent: 5}}},
	}}
	withResult := fsm.Cmd{Op: fsm.OpReport, Report: &fsm.Report{JobID: "j", Lease: 1, Success: true, Result: json.RawMessage(`1`)}}
	jobWithProgress := fsm.Cmd{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: "j", Lease: 1, LeaseTTL: 1, Progress: &fsm.LeaseProgress{Percent: 5}}}
	for _, c := range []fsm.Cmd{withProgress, withResult, jobWithProgress} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
			t.Errorf("Encode wrote a %s of protocol 3", c.Op)
		}
	}
	for _, data := range [][]byte{
		[]byte("\x02\x02\x01\x0e\x01w\x02\x01\x01\x01j\x02\x00\x00\x00\x01\x0a\x00"),                                 // op code 14
		[]byte("\x02\x02\x01\x0d\x01j\x02\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x011\x00"), // op code 13
		[]byte("\x02\x02\x01\x10\x01j\x01\x02\x00\x01\x0a\x00"),                                                      // op code 16
	} {
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", data)
		}
	}
}
