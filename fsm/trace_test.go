//go:build !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/binenc"
)

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceParent(t *testing.T) {
	t.Run("ASubmitWithoutTraceKeepsItsOldOpCode", func(t *testing.T) {
		// Op code at byte 3: version, Now (varint 0), count 1, op code.
		for _, c := range []struct {
			name string
			job  fsm.NewJob
			code byte
		}{
			{"Plain", fsm.NewJob{Command: "x"}, 1},
			{"Keyed", fsm.NewJob{Command: "x", ConcurrencyKey: "acme"}, 11},
			{"Traced", fsm.NewJob{Command: "x", TraceParent: testTraceParent}, 15},
			{"KeyedAndTraced", fsm.NewJob{Command: "x", ConcurrencyKey: "acme", TraceParent: testTraceParent}, 15},
		} {
			data := mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{submit(c.job)}})
			if data[3] != c.code {
				t.Errorf("%s: op code %d, want %d", c.name, data[3], c.code)
			}
			got := mustDecode(t, data).Cmds[0].Submit.Jobs[0]
			if got.TraceParent != c.job.TraceParent || got.ConcurrencyKey != c.job.ConcurrencyKey {
				t.Errorf("%s: read back trace %q key %q, want %q %q", c.name, got.TraceParent, got.ConcurrencyKey, c.job.TraceParent, c.job.ConcurrencyKey)
			}
		}
	})

	t.Run("ATracedSubmitNeedsProtocolTrace", func(t *testing.T) {
		plain := fsm.Entry{Cmds: []fsm.Cmd{submit(fsm.NewJob{Command: "x"})}}
		traced := fsm.Entry{Cmds: []fsm.Cmd{submit(fsm.NewJob{Command: "x"}, fsm.NewJob{Command: "y", TraceParent: testTraceParent})}}
		if p := plain.Protocol(); p != 1 {
			t.Errorf("a submit without trace needs protocol %d, want 1", p)
		}
		if p := traced.Protocol(); p != fsm.ProtocolTrace || fsm.ProtocolTrace != 3 {
			t.Errorf("a traced submit needs protocol %d, want ProtocolTrace (%d) = 3", p, fsm.ProtocolTrace)
		}
	})

	t.Run("TheJobKeepsItsTraceThroughAttemptsAndASnapshot", func(t *testing.T) {
		h := setup(t).at(time.Second)
		id := h.ok(submit(fsm.NewJob{Command: "x", MaxAttempts: 2, TraceParent: testTraceParent})).Jobs[0].ID
		if got := h.job(id).TraceParent; got != testTraceParent {
			t.Fatalf("stored trace %q, want %q", got, testTraceParent)
		}
		j := h.ok(claimCmd(fsm.Claim{WorkerID: "w", Queues: []string{fsm.DefaultQueue}, Max: 1, LeaseTTL: int64(ttl)})).Jobs[0]
		if j.TraceParent != testTraceParent {
			t.Fatalf("claimed job's trace %q, want %q", j.TraceParent, testTraceParent)
		}
		h.ok(report(fsm.Report{JobID: id, Lease: j.Lease, Error: "boom"}))
		if got := h.job(id).TraceParent; got != testTraceParent {
			t.Fatalf("trace after a failed attempt %q, want %q", got, testTraceParent)
		}
		g := snapshotRestore(t, h.f)
		if got, err := g.Job(id); err != nil || got.TraceParent != testTraceParent {
			t.Fatalf("restored job's trace %q (%v), want %q", got.TraceParent, err, testTraceParent)
		}
	})
}

func TestTracedGangsAndFires(t *testing.T) {
	gang := func(tp string) fsm.Cmd { return submitGang(3, fsm.NewJob{Command: "g", TraceParent: tp}) }
	tracedFire := func(name string, tick time.Time, tp string) fsm.Cmd {
		c := fire(name, tick)
		c.Fire.TraceParent = tp
		return c
	}
	tick := t0.Add(time.Minute)

	t.Run("ATraceIsWrittenUnderTheTracedOpNameAndNeedsProtocolTrace", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			cmd    fsm.Cmd
			opName string
			proto  int
		}{
			{"PlainGang", gang(""), `"op":"submit_gang"`, 1},
			{"TracedGang", gang(testTraceParent), `"op":"submit_gang_traced"`, fsm.ProtocolTrace},
			{"PlainFire", fire("s", tick), `"op":"fire"`, 1},
			{"TracedFire", tracedFire("s", tick, testTraceParent), `"op":"fire_traced"`, fsm.ProtocolTrace},
		} {
			if p := c.cmd.Protocol(); p != c.proto {
				t.Errorf("%s: needs protocol %d, want %d", c.name, p, c.proto)
			}
			data := mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{c.cmd}})
			if !strings.Contains(string(data), c.opName) {
				t.Errorf("%s: encoded %q, want op name %s", c.name, data, c.opName)
			}
			got := mustDecode(t, data).Cmds[0]
			if got.Op != c.cmd.Op || !reflect.DeepEqual(got, c.cmd) {
				t.Errorf("%s: read back %+v, want %+v", c.name, got, c.cmd)
			}
		}
	})

	t.Run("DecodeRefusesATraceUnderThePlainNameAndATracedNameWithoutOne", func(t *testing.T) {
		for _, js := range []string{
			`{"op":"fire","fire":{"name":"s","tick":1,"job":"x","trace":"` + testTraceParent + `"}}`,
			`{"op":"submit_gang","submit_gang":{"size":1,"job":{"cmd":"g","backoff":{},"trace":"` + testTraceParent + `"}}}`,
			`{"op":"fire_traced","fire":{"name":"s","tick":1,"job":"x"}}`,
			`{"op":"submit_gang_traced","submit_gang":{"size":1,"job":{"cmd":"g","backoff":{}}}}`,
		} {
			data := binenc.AppendBytes([]byte{fsm.EncodingVersion, 0, 1, 0}, []byte(js))
			if _, err := fsm.Decode(data); err == nil || !strings.Contains(err.Error(), "trace") {
				t.Errorf("Decode of %s: %v, want it refused for its trace", js, err)
			}
		}
		plain := `{"op":"fire","fire":{"name":"s","tick":1,"job":"x"}}`
		if _, err := fsm.Decode(binenc.AppendBytes([]byte{fsm.EncodingVersion, 0, 1, 0}, []byte(plain))); err != nil {
			t.Errorf("Decode of %s: %v", plain, err)
		}
	})

	t.Run("EveryTaskOfAGangKeepsItsTrace", func(t *testing.T) {
		h := setup(t)
		res := h.ok(gang(testTraceParent))
		for _, j := range res.Jobs {
			if got := h.job(j.ID).TraceParent; got != testTraceParent {
				t.Errorf("task %s stores trace %q, want the gang's %q", j.ID, got, testTraceParent)
			}
		}
		g := snapshotRestore(t, h.f)
		if got, err := g.Job(res.Jobs[2].ID); err != nil || got.TraceParent != testTraceParent {
			t.Fatalf("restored task's trace %q (%v), want %q", got.TraceParent, err, testTraceParent)
		}
		for _, j := range h.ok(gang("")).Jobs {
			if j.TraceParent != "" {
				t.Errorf("a task of a gang without a trace stores %q", j.TraceParent)
			}
		}
	})

	t.Run("AFiredJobKeepsTheFiresTrace", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("s", fsm.OverlapAllow))
		j := h.ok(tracedFire("s", tick, testTraceParent)).Jobs[0]
		if got := h.job(j.ID).TraceParent; got != testTraceParent || j.Schedule != "s" {
			t.Fatalf("fired job %s of schedule %q stores trace %q, want %q", j.ID, j.Schedule, got, testTraceParent)
		}
		if j := h.ok(fire("s", tick.Add(time.Minute))).Jobs[0]; j.TraceParent != "" {
			t.Errorf("a fire without a trace made job %s with trace %q", j.ID, j.TraceParent)
		}
		// A duplicate of the traced fire changes nothing.
		if r := h.ok(tracedFire("s", tick, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")); len(r.Jobs) != 0 {
			t.Fatalf("a duplicate fire made jobs %v", jobIDs(r.Jobs))
		}
		if got := h.job(j.ID).TraceParent; got != testTraceParent {
			t.Fatalf("after a duplicate fire the job's trace is %q", got)
		}
	})
}
