//go:build !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"testing"
	"time"

	"github.com/workron/workron/fsm"
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
