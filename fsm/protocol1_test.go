//go:build workron_protocol1

package fsm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// A binary built with the workron_protocol1 tag behaves as a release before
// retry_deps: it does not write it, and stops at an entry that holds it,
// saying to upgrade, as those releases do (TestUpgradeMessages). Run with
// go test -tags workron_protocol1 -run TestProtocol1 ./fsm/.
func TestProtocol1Binary(t *testing.T) {
	if fsm.ProtocolVersion != 1 {
		t.Fatalf("ProtocolVersion = %d with the workron_protocol1 tag", fsm.ProtocolVersion)
	}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{retryDeps("job-1")}}); err == nil {
		t.Error("Encode wrote retry_deps")
	}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{forget("w", 1)}}); err == nil {
		t.Error("Encode wrote forget_worker")
	}
	fenced := fsm.Cmd{Op: fsm.OpReport, Report: &fsm.Report{JobID: "job-1", Success: true, Token: "fleet"}}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{fenced}}); err == nil {
		t.Error("Encode wrote a report with a token (a field of ProtocolFence)")
	}
	keyed := submit(fsm.NewJob{Command: "x", ConcurrencyKey: "acme"})
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{keyed}}); err == nil {
		t.Error("Encode wrote a submit with a concurrency key (ProtocolFlow)")
	}
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{setLimits("q", store.QueueLimits{Concurrency: 1})}}); err == nil {
		t.Error("Encode wrote set_queue_limits")
	}
	for _, data := range [][]byte{
		[]byte("\x02\x02\x01\x0b\x00"), // op code 11, a keyed submit (of no jobs)
		[]byte("\x02\x02\x01\x00" + withLen(`{"op":"set_queue_limits","qlimits":{"name":"q","limits":{"conc":1}}}`)),
		[]byte("\x02\x02\x01\x0a" + "\x05job-1\x00\x01\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x05fleet"), // op code 10, report of ProtocolFence
		[]byte("\x02\x02\x01\x00" + withLen(`{"op":"register_fence","register":{"worker":{"id":"w"},"token":"fleet"}}`)),
	} {
		if _, err := fsm.Decode(data); err == nil {
			t.Errorf("Decode of %q: accepted, want it refused", data)
		}
	}
	data := []byte("\x02\x02\x01\x00" + withLen(`{"op":"retry_deps","retry":{"job":"job-1","deps":true}}`))
	if _, err := fsm.Decode(data); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("Decode of retry_deps: %v, want it refused as unknown", err)
	}
	f := newTestFSM(t)
	applyCmd(t, f, 1, t0, submit(fsm.NewJob{Command: "x"}))
	before := digest(t, f)
	v := mustPanic(t, func() { f.ApplyBatch([]*raft.Log{{Index: 2, Type: raft.LogCommand, Data: data}}) })
	if msg := fmt.Sprint(v); !strings.Contains(msg, "upgrade this node's binary") {
		t.Errorf("panic %q does not say to upgrade", msg)
	}
	if digest(t, f) != before {
		t.Error("the stopped batch changed the stored state")
	}
}
