package chaos

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// durableRun is a clean run of one durable job j1 (key d1): attempt 1
// (lease 5) records reserve, dies in notify, and, cut off, runs settle
// after a later attempt recorded it (a stale run); attempt 2 (lease 10)
// replays reserve, records notify and notify#2 and parks on its sleep;
// the next (lease 20, claimed after the wake time) gets past the sleep,
// gets its event (sent before the wait began) and parks on its child c1;
// the last (lease 30) gets the child's result, records settle and ends.
func durableRun() durableInput {
	at := int64(1000)
	line := func(t, key string, lease uint64, r string) ledgerLine {
		at++
		return ledgerLine{T: t, Job: "j1", Key: key, Lease: lease, Attempt: map[uint64]int{5: 1}[lease] + 2*min(1, int(lease/10)), Worker: "w", Run: r, At: at}
	}
	run := func(key string, lease uint64, r string) ledgerLine { return line(ledgerRun, key, lease, r) }
	commit := func(key string, lease uint64, r string) ledgerLine { return line(ledgerCommit, key, lease, r) }
	rec := func(key, r string, lease uint64, attempt int) wire.Step {
		b, _ := json.Marshal(stepResult{Run: r, Lease: lease, Attempt: attempt})
		return wire.Step{Key: key, Status: wire.StepOK, Result: b}
	}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	wake := t0.Add(time.Second)
	heard := line(ledgerHeard, "hear", 20, "")
	heard.Heard, heard.N, heard.EventKey = true, 1, "d1"
	heard2 := heard
	heard2.Lease, heard2.At = 30, heard.At+100
	spawned := line(ledgerSpawned, "spawn", 30, "c-run")
	spawned.Child = "c1"
	child := ledgerLine{T: ledgerChild, Job: "c1", Attempt: 1, Lease: 25, Worker: "w", Run: "c-run", Parent: "j1"}
	return durableInput{
		accepted: map[string]string{"d1": "j1"},
		jobs: []wire.Job{
			{ID: "j1", Type: durableType, IdempotencyKey: "d1", Status: wire.StatusDone, Lease: 30, Attempts: 2,
				Metadata: map[string]string{"event": eventBefore, "event_key": "d1"},
				AttemptHistory: []wire.Attempt{{Attempt: 1, Lease: 5, Status: wire.StatusFailed, Expired: true, Started: t0.Add(-time.Second)},
					{Attempt: 2, Lease: 10, Status: wire.StatusScheduled, Started: t0.Add(-time.Second / 2)},
					{Attempt: 2, Lease: 20, Status: wire.StatusScheduled, Started: t0.Add(2 * time.Second)},
					{Attempt: 2, Lease: 30, Status: wire.StatusDone, Started: t0.Add(3 * time.Second)}}},
			{ID: "c1", Type: durableChildType, Status: wire.StatusDone, Lease: 25, Attempts: 1, Metadata: map[string]string{"parent": "j1"}},
		},
		journals: map[string][]wire.Step{"j1": {
			{Key: "hear", Kind: wire.StepWait, Status: wire.StepOK, Result: json.RawMessage(`{"key":"d1","n":1}`)},
			{Key: "nap", Kind: wire.StepSleep, Status: wire.StepOK, WakeAt: &wake},
			rec("notify", "b1", 10, 2), rec("notify#2", "b2", 10, 2), rec("reserve", "a1", 5, 1), rec("settle", "d1", 30, 2),
			{Key: "spawn", Kind: wire.StepInvoke, Status: wire.StepOK, ChildID: "c1", Result: json.RawMessage(`{"child":"c1","run":"c-run"}`)},
		}, "c1": nil},
		ledger: []ledgerLine{
			run("reserve", 5, "a1"), commit("reserve", 5, "a1"),
			run("notify", 5, "a2"),
			commit("reserve", 10, "a1"),
			run("notify", 10, "b1"), commit("notify", 10, "b1"),
			run("notify#2", 10, "b2"), commit("notify#2", 10, "b2"),
			line(ledgerPark, "nap", 10, ""),
			line(ledgerWoke, "nap", 20, ""), line(ledgerWait, "hear", 20, ""), heard, line(ledgerPark, "spawn", 20, ""),
			child,
			line(ledgerWoke, "nap", 30, ""), line(ledgerWait, "hear", 30, ""), heard2, spawned,
			run("settle", 30, "d1"), commit("settle", 30, "d1"),
			run("settle", 5, "a3"),
			{T: ledgerEnd, Job: "j1", Lease: 30, Attempt: 2, Worker: "w", Steps: map[string]string{"reserve": "a1", "notify": "b1", "notify#2": "b2", "settle": "d1"}},
		},
		events: map[string]eventSend{"d1": {Mode: eventBefore, Call: 900, Return: 950, Rescued: true}},
	}
}

func (in durableInput) clone() durableInput {
	out := durableInput{accepted: maps.Clone(in.accepted), ledger: slices.Clone(in.ledger), journals: map[string][]wire.Step{},
		events: maps.Clone(in.events), clockJumps: slices.Clone(in.clockJumps)}
	for _, j := range in.jobs {
		j.AttemptHistory = slices.Clone(j.AttemptHistory)
		j.Metadata = maps.Clone(j.Metadata)
		out.jobs = append(out.jobs, j)
	}
	for id, st := range in.journals {
		out.journals[id] = slices.Clone(st)
	}
	return out
}

func TestCheckDurableCleanRun(t *testing.T) {
	res := checkDurable(durableRun())
	if len(res.Anomalies) != 0 {
		t.Fatalf("a clean run has anomalies: %q", res.Anomalies)
	}
	want := durableResult{Jobs: 1, Done: 1, Runs: 6, Records: 4, Unrecorded: 2, Stale: 1, Sleeps: 1, Heard: 1, Before: 1, Children: 1}
	if res.String() != want.String() {
		t.Fatalf("counted %s, want %s", res, want)
	}
}

// TestCheckDurable plants one fault at a time in a clean run and shows the
// check that catches it.
func TestCheckDurable(t *testing.T) {
	insert := func(ledger []ledgerLine, at int, l ledgerLine) []ledgerLine {
		return slices.Insert(ledger, at, l)
	}
	setRecord := func(in *durableInput, key, r string, lease uint64, attempt int) {
		for i, st := range in.journals["j1"] {
			if st.Key == key {
				b, _ := json.Marshal(stepResult{Run: r, Lease: lease, Attempt: attempt})
				in.journals["j1"][i].Result = b
			}
		}
	}
	dropRecord := func(in *durableInput, key string) {
		in.journals["j1"] = slices.DeleteFunc(in.journals["j1"], func(st wire.Step) bool { return st.Key == key })
	}
	cases := []struct {
		name  string
		plant func(in *durableInput)
		want  []string
	}{
		{"a later attempt runs a recorded step", func(in *durableInput) {
			// attempt 2 runs reserve although attempt 1's record committed
			in.ledger = insert(in.ledger, 3, ledgerLine{T: ledgerRun, Job: "j1", Key: "reserve", Lease: 10, Attempt: 2, Run: "b0"})
		}, []string{"durable job j1 step reserve ran again (run b0, attempt 2, lease 10, worker ) after its record by attempt 1 (lease 5, run a1) committed"}},
		{"a later attempt without a lease runs a recorded step", func(in *durableInput) {
			in.ledger = insert(in.ledger, 3, ledgerLine{T: ledgerRun, Job: "j1", Key: "reserve", Attempt: 2, Run: "b0"})
		}, []string{"step reserve ran again (run b0, attempt 2, lease 0"}},
		{"the recording attempt runs its step twice", func(in *durableInput) {
			in.ledger = insert(in.ledger, 5, ledgerLine{T: ledgerRun, Job: "j1", Key: "notify", Lease: 10, Attempt: 2, Run: "b9"})
		}, []string{"durable job j1 step notify ran twice in attempt 2 (lease 10): runs b1 and b9"}},
		{"a run of unknown lease after the record came back", func(in *durableInput) {
			in.ledger = insert(in.ledger, 2, ledgerLine{T: ledgerRun, Job: "j1", Key: "reserve", Attempt: 1, Run: "a9"})
		}, []string{"durable job j1 step reserve ran again (run a9, attempt 1, worker ) after its record came back (line 2 of the ledger)"}},
		{"a record that came back is not the one kept", func(in *durableInput) {
			setRecord(in, "notify#2", "b2", 10, 2)
			in.ledger[7].Run = "other"
		}, []string{"durable job j1 step notify#2: the record that came back to attempt 2 (lease 10) is run other, but the journal keeps run b2"}},
		{"a record that came back is lost", func(in *durableInput) {
			dropRecord(in, "settle")
		}, []string{"durable job j1 step settle: its record (run d1) came back to attempt 2 (lease 30), but the journal holds no such step",
			"durable job j1 ended done with steps [hear nap notify notify#2 reserve spawn] in its journal"}},
		{"a step recorded under a key the handler never uses", func(in *durableInput) {
			b, _ := json.Marshal(stepResult{Run: "b2", Lease: 10, Attempt: 2})
			in.journals["j1"] = append(in.journals["j1"], wire.Step{Key: "notify#3", Status: wire.StepOK, Result: b})
		}, []string{"durable job j1: the journal holds step notify#3, which the handler never names",
			"durable job j1 ended done with steps [hear nap notify notify#2 notify#3 reserve settle spawn]",
			"durable job j1 step notify#3: the journal keeps run b2 (lease 10), which no step of the ledger ran"}},
		{"a step listed twice", func(in *durableInput) {
			in.journals["j1"] = append(in.journals["j1"], *findStep(in.journals["j1"], "notify"))
		}, []string{"durable job j1: the journal lists step notify twice", "ended done with steps [hear nap notify notify notify#2 reserve settle spawn]"}},
		{"a record of a run the ledger never saw", func(in *durableInput) {
			setRecord(in, "notify#2", "ghost", 10, 2)
		}, []string{"durable job j1 step notify#2: the journal keeps run ghost (lease 10), which no step of the ledger ran",
			"durable job j1 step notify#2 ran twice in attempt 2 (lease 10): runs ghost and b2",
			"durable job j1 step notify#2: the record that came back to attempt 2 (lease 10) is run b2, but the journal keeps run ghost",
			"durable job j1 ended done by lease 30, whose step notify#2 returned run b2, but the journal keeps run ghost"}},
		{"a record by a lease that is no attempt of the job", func(in *durableInput) {
			setRecord(in, "reserve", "a1", 7, 1)
		}, []string{"durable job j1 step reserve: recorded by lease 7, which is no attempt of the job",
			"durable job j1 step reserve: the journal keeps run a1 (lease 7), which no step of the ledger ran"}},
		{"a step recorded as failed", func(in *durableInput) {
			findStep(in.journals["j1"], "notify").Status = wire.StepFailed
		}, []string{"durable job j1 step notify: recorded failed",
			"durable job j1 step notify: its record (run b1) came back to attempt 2 (lease 10), but the journal holds no such step"}},
		{"the done attempt saw another run than the journal keeps", func(in *durableInput) {
			in.ledger[len(in.ledger)-1].Steps = map[string]string{"reserve": "a1", "notify": "b1", "notify#2": "b2", "settle": "a3"}
		}, []string{"durable job j1 ended done by lease 30, whose step settle returned run a3, but the journal keeps run d1"}},
		{"the done attempt never ended its handler", func(in *durableInput) {
			in.ledger = in.ledger[:len(in.ledger)-1]
		}, []string{"durable job j1 ended done by lease 30, whose handler never ended in the ledger"}},
		{"a lost job", func(in *durableInput) {
			in.accepted["d2"] = "j2"
		}, []string{"lost job: the submit of d2 was answered with j2, which does not exist"}},
		{"a job not finished", func(in *durableInput) {
			in.jobs[0].Status = wire.StatusRunning
		}, []string{"durable job j1 (d1) is still running after quiescence"}},
		{"a ledger line of a job the cluster does not have", func(in *durableInput) {
			in.ledger = append(in.ledger, ledgerLine{T: ledgerRun, Job: "j9", Key: "reserve", Run: "x"})
		}, []string{"the ledger names durable job j9, which the cluster does not list"}},
		{"a sleep wakes early", func(in *durableInput) {
			in.jobs[0].AttemptHistory[2].Started = in.jobs[0].AttemptHistory[1].Started
		}, []string{"durable job j1: sleep nap woke early: the attempt past it (lease 20) was claimed at 2026-11-27T11:59:59.5Z, before its wake time 2026-11-27T12:00:01Z"}},
		{"a sleep wakes twice", func(in *durableInput) {
			in.ledger = insert(in.ledger, 15, ledgerLine{T: ledgerPark, Job: "j1", Key: "nap", Lease: 30, Attempt: 2})
		}, []string{"durable job j1: sleep nap woke twice: attempt 2 (lease 30) parked on it after attempt 2 (lease 20) had got past it"}},
		{"an older attempt's late park answer is no second wake", func(in *durableInput) {
			in.ledger = insert(in.ledger, 15, ledgerLine{T: ledgerPark, Job: "j1", Key: "nap", Lease: 10, Attempt: 2})
		}, nil},
		{"a sleep never wakes", func(in *durableInput) {
			in.ledger = slices.DeleteFunc(in.ledger, func(l ledgerLine) bool { return l.T == ledgerWoke })
		}, []string{"durable job j1 ended done, but the code after its sleep nap never ran"}},
		{"a sleep recorded without its wake time", func(in *durableInput) {
			findStep(in.journals["j1"], "nap").WakeAt = nil
		}, []string{"durable job j1: sleep nap recorded ok, wake time <nil>",
			"durable job j1: the code after sleep nap ran (attempt 2, lease 20), but the journal holds no such sleep"}},
		{"a wait misses its event", func(in *durableInput) {
			findStep(in.journals["j1"], "hear").Result = json.RawMessage(`{"key":"d1","n":2}`)
			for i := range in.ledger {
				if in.ledger[i].T == ledgerHeard {
					in.ledger[i].N = 2
				}
			}
		}, []string{"durable job j1: wait hear missed its event (key d1, accepted 1970-01-01T00:00:00.00000095Z): it got the rescue the harness sent after healing"}},
		{"a wait times out although its event was sent", func(in *durableInput) {
			st := findStep(in.journals["j1"], "hear")
			st.Status, st.Result = wire.StepTimeout, nil
			for i := range in.ledger {
				if in.ledger[i].T == ledgerHeard {
					in.ledger[i].Heard, in.ledger[i].N = false, 0
				}
			}
		}, []string{"durable job j1: wait hear timed out, but its event (key d1) was sent and accepted within its 3-hour window"}},
		{"a wait gets an event nobody sent", func(in *durableInput) {
			in.jobs[0].Metadata["event"] = eventNone
		}, []string{"durable job j1: wait hear got event 1 for key d1, which nobody sent"}},
		{"a wait gets another key's event", func(in *durableInput) {
			findStep(in.journals["j1"], "hear").Result = json.RawMessage(`{"key":"d7","n":1}`)
		}, []string{"durable job j1: wait hear for key d1 got {\"key\":\"d7\",\"n\":1}, not its event"}},
		{"a wait returns what the journal does not record", func(in *durableInput) {
			in.ledger[11].N = 2
		}, []string{"durable job j1: wait hear returned heard=true event 2 to attempt 2 (lease 20), but the journal records ok with {\"key\":\"d1\",\"n\":1}"}},
		{"a child submitted twice", func(in *durableInput) {
			in.jobs = append(in.jobs, wire.Job{ID: "c2", Type: durableChildType, Status: wire.StatusDone, Metadata: map[string]string{"parent": "j1"}})
		}, []string{"durable job j1: its child was submitted 2 times: [c1 c2]", "child job c2 of j1: no invoke step of its parent names it"}},
		{"an invoke names a child the cluster does not have", func(in *durableInput) {
			findStep(in.journals["j1"], "spawn").ChildID = "c9"
		}, []string{"durable job j1: invoke spawn names child \"c9\", which the cluster does not list", "child job c1 of j1: no invoke step of its parent names it",
			"durable job j1: invoke spawn returned child c1 run c-run to attempt 2 (lease 30), but the journal records {Child: Run:}"}},
		{"an invoke records what no run of its child returned", func(in *durableInput) {
			findStep(in.journals["j1"], "spawn").Result = json.RawMessage(`{"child":"c1","run":"other"}`)
		}, []string{"durable job j1: invoke spawn recorded {\"child\":\"c1\",\"run\":\"other\"}, not a run of its child c1",
			"durable job j1: invoke spawn returned child c1 run c-run to attempt 2 (lease 30), but the journal records {Child:c1 Run:other}"}},
		{"a child not finished", func(in *durableInput) {
			in.jobs[1].Status = wire.StatusRunning
		}, []string{"durable job j1's child c1 is still running after quiescence", "durable job j1: invoke spawn recorded ok, but its child c1 is running"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := durableRun().clone()
			tc.plant(&in)
			res := checkDurable(in)
			for _, w := range tc.want {
				if !slices.ContainsFunc(res.Anomalies, func(a string) bool { return strings.Contains(a, w) }) {
					t.Errorf("no anomaly says %q; got %q", w, res.Anomalies)
				}
			}
			if len(res.Anomalies) != len(tc.want) {
				t.Errorf("got %d anomalies, want %d: %q", len(res.Anomalies), len(tc.want), res.Anomalies)
			}
		})
	}
}

// TestCheckWaitsExcusesAClockJump: an event lost while a clock jump was
// in effect is not counted missed (a jump of an hour moves the log's
// clock past the look-back window).
func TestCheckWaitsExcusesAClockJump(t *testing.T) {
	in := durableRun().clone()
	findStep(in.journals["j1"], "hear").Result = json.RawMessage(`{"key":"d1","n":2}`)
	for i := range in.ledger {
		if in.ledger[i].T == ledgerHeard {
			in.ledger[i].N = 2
		}
	}
	in.clockJumps = [][2]int64{{920, 1005}}
	res := checkDurable(in)
	if len(res.Anomalies) != 0 || res.Excused != 1 {
		t.Fatalf("excused %d, anomalies %q; want 1 excused and none", res.Excused, res.Anomalies)
	}
}

func TestDurableKeys(t *testing.T) {
	if got, want := durableKeys(), []string{"reserve", "notify", "notify#2", "nap", "hear", "spawn", "settle"}; !slices.Equal(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
}
