package fsm_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/workron/workron/internal/testkit/golden"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// fullNewJob sets every field of a NewJob but ConcurrencyKey and
// TraceParent, with values at the edges of their encodings.
func fullNewJob() fsm.NewJob {
	return fsm.NewJob{
		ID: "etl-\u00e9", Command: "python3 nightly.py", Type: "email.send", Payload: json.RawMessage(`{"to":"a@b.c"}`),
		Env: map[string]string{"B": "2", "A": "1", "": ""}, Metadata: map[string]string{"team": "data"},
		Queue: "etl", Priority: math.MinInt64, DependsOn: []string{"$1", "job-7"}, MaxAttempts: math.MaxInt64,
		IdempotencyKey: "idem", Timeout: -1, Backoff: store.Backoff{Base: 1e9, Max: math.MaxInt64, Jitter: 0.3},
		RunAt: 1763700004000000000, Retention: 7 * 24 * 3600e9, UniqueFor: 3600e9, Schedule: "nightly",
		ScheduledFor: -5, Resources: store.Resources{VRAMMB: 1, MemoryMB: -2, CPUMillis: 3, Slots: 4},
		Tags: []string{"gpu", ""},
	}
}

// goldenSubmits are entries whose bytes testdata/submit_entries.golden
// holds as Workron wrote them before the submit's jobs were one walk: a
// submit of each op code (1, 11, 15), every field set, and the least
// protocol that reads it.
func goldenSubmits() map[string]struct {
	protocol int
	e        *fsm.Entry
} {
	keyed := fullNewJob()
	keyed.ConcurrencyKey = "tenant-7"
	traced := fullNewJob()
	traced.ConcurrencyKey = "tenant-7"
	traced.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tracedOnly := fsm.NewJob{Command: "x", TraceParent: traced.TraceParent}
	return map[string]struct {
		protocol int
		e        *fsm.Entry
	}{
		"Submit":       {1, &fsm.Entry{Now: 1763700000000000000, Cmds: []fsm.Cmd{submit(fullNewJob(), fsm.NewJob{})}}},
		"SubmitKeyed":  {2, &fsm.Entry{Now: -1, Cmds: []fsm.Cmd{submit(keyed, fsm.NewJob{Command: "y"})}}},
		"SubmitTraced": {3, &fsm.Entry{Now: 0, Cmds: []fsm.Cmd{submit(traced, tracedOnly)}}},
	}
}

// TestSubmitBytesArePinned checks that each golden submit encodes to the
// bytes releases wrote, and that those bytes decode to the entry: Raft
// logs hold them.
func TestSubmitBytesArePinned(t *testing.T) {
	golden := golden.ReadHex(t, "testdata/submit_entries.golden")
	cases := goldenSubmits()
	if len(golden) != len(cases) {
		t.Fatalf("%d golden entries for %d cases", len(golden), len(cases))
	}
	for name, c := range cases {
		want, ok := golden[name]
		if !ok {
			t.Fatalf("no golden entry %s", name)
		}
		if c.protocol > fsm.ProtocolVersion {
			continue // this binary neither writes nor reads it
		}
		if got := mustEncode(t, c.e); !bytes.Equal(got, want) {
			t.Errorf("%s encodes to\n%x\nreleases wrote\n%x", name, got, want)
		}
		if got, err := fsm.Decode(want); err != nil || !reflect.DeepEqual(got, c.e) {
			t.Errorf("%s: released bytes decode to %s, %v\nwant %s", name, dump(got), err, dump(c.e))
		}
	}
}
