//go:build workron_protocol2 && !workron_protocol1

package fsm_test

import (
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/binenc"
)

// A binary built with the workron_protocol2 tag is the release before
// traces: it does not write a traced submit, and stops at one. Run with
// go test -tags workron_protocol2 -run TestProtocol2 ./fsm/.
func TestProtocol2BinaryTraces(t *testing.T) {
	traced := submit(fsm.NewJob{Command: "x", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{traced}}); err == nil {
		t.Error("Encode wrote a submit with a trace (ProtocolTrace)")
	}
	if _, err := fsm.Decode([]byte("\x02\x02\x01\x0f\x00")); err == nil { // op code 15, a traced submit of no jobs
		t.Error("Decode accepted op code 15 (a traced submit)")
	}
	if _, err := fsm.Decode([]byte("\x02\x02\x01\x0b\x00")); err != nil { // op code 11, a keyed submit
		t.Errorf("Decode refused op code 11 (protocol 2): %v", err)
	}
	// A traced gang or fire: not written, and refused when read.
	gang := fsm.Cmd{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: 1, Job: fsm.NewJob{Command: "g", TraceParent: testTraceParent2}}}
	fire := fsm.Cmd{Op: fsm.OpFire, Fire: &fsm.Fire{Name: "s", Tick: 1, JobID: "x", TraceParent: testTraceParent2}}
	for _, c := range []fsm.Cmd{gang, fire} {
		if _, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}}); err == nil {
			t.Errorf("Encode wrote a %s with a trace (ProtocolTrace)", c.Op)
		}
	}
	for _, js := range []string{
		`{"op":"fire_traced","fire":{"name":"s","tick":1,"job":"x","trace":"` + testTraceParent2 + `"}}`,
		`{"op":"submit_gang_traced","submit_gang":{"size":1,"job":{"cmd":"g","backoff":{},"trace":"` + testTraceParent2 + `"}}}`,
	} {
		data := binenc.AppendBytes([]byte{fsm.EncodingVersion, 0, 1, 0}, []byte(js))
		if _, err := fsm.Decode(data); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("Decode of %s: %v, want it refused as unknown", js, err)
		}
	}
}

const testTraceParent2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
