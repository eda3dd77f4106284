//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func recordStep(s fsm.RecordStep) fsm.Cmd { return fsm.Cmd{Op: fsm.OpRecordStep, RecordStep: &s} }

func TestSteps(t *testing.T) {
	running := func(t *testing.T) (*harness, *store.Job) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Slots: 2}))
		h.submit(fsm.NewJob{ID: "order-1", Command: "a", MaxAttempts: 3, Retention: int64(time.Hour)})
		return h, h.claimOne("w1")
	}

	t.Run("ARecordedStepIsKeptAndASecondRecordGetsTheFirst", func(t *testing.T) {
		h, j := running(t)
		r := h.at(time.Second).ok(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "charge", Result: []byte(`"ch_1"`), Duration: 5}))
		if r.Step == nil || r.Step.Status != store.StepOK || r.Step.Attempt != 1 || r.Step.RecordedAt != ns(t0.Add(time.Second)) {
			t.Fatalf("recorded %+v", r.Step)
		}
		again := h.reject(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "charge", Result: []byte(`"ch_2"`)}), fsm.ErrStepRecorded)
		if again.Step == nil || string(again.Step.Result) != `"ch_1"` {
			t.Fatalf("second record's result carries %+v, want the first", again.Step)
		}
		s, err := h.f.Step(j.ID, "charge")
		if err != nil || string(s.Result) != `"ch_1"` || s.Duration != 5 || s.Attempts != 1 {
			t.Fatalf("Step = %+v, %v", s, err)
		}
		if _, err := h.f.Step(j.ID, "send"); !errors.Is(err, fsm.ErrNotFound) {
			t.Fatalf("Step of an unrecorded key: %v, want ErrNotFound", err)
		}
	})

	t.Run("AStaleAttemptCannotRecord", func(t *testing.T) {
		h, j := running(t)
		h.at(2 * ttl).ok(expire(j.ID, j.Lease))
		j2 := h.at(time.Hour).claimOne("w1")
		h.reject(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "a"}), fsm.ErrStaleLease)
		h.reject(recordStep(fsm.RecordStep{JobID: j.ID, Key: "a"}), fsm.ErrLeaseRequired)
		h.ok(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j2.Lease, Key: "a"}))
		h.ok(succeed(j.ID, j2.Lease))
		h.reject(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j2.Lease, Key: "b"}), fsm.ErrStaleLease)
		if _, err := h.f.Step(j.ID, "b"); !errors.Is(err, fsm.ErrNotFound) {
			t.Fatalf("a refused record was kept: %v", err)
		}
	})

	t.Run("AnotherTokensAttemptCannotRecord", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"})
		j := h.claim(fsm.Claim{WorkerID: "w1", Token: "alice", Fenced: true})[0]
		h.reject(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Token: "bob", Key: "a"}), fsm.ErrForbidden)
		h.ok(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Token: "alice", Key: "a"}))
	})

	t.Run("BoundsAreRefusedNamingTheLimit", func(t *testing.T) {
		h, j := running(t)
		for _, c := range []struct {
			s     fsm.RecordStep
			field string
		}{
			{fsm.RecordStep{Key: ""}, "step"},
			{fsm.RecordStep{Key: strings.Repeat("k", fsm.MaxStepKeyBytes+1)}, "step"},
			{fsm.RecordStep{Key: "a/b"}, "step"},
			{fsm.RecordStep{Key: "a", Result: make([]byte, fsm.MaxStepResultBytes+1)}, "result"},
			{fsm.RecordStep{Key: "a", Attempts: -1}, "attempts"},
		} {
			c.s.JobID, c.s.Lease = j.ID, j.Lease
			r := h.reject(recordStep(c.s), nil)
			var ve *fsm.ValidationError
			if !errors.As(r.Err, &ve) || ve.Field != c.field {
				t.Errorf("record %q (%d bytes): %v, want a ValidationError of %s", c.s.Key, len(c.s.Result), r.Err, c.field)
			}
		}
		// The journal's bytes: 64 results of 256 KiB fill 16 MiB with their keys.
		big := make([]byte, fsm.MaxStepResultBytes)
		n := 0
		for ; ; n++ {
			r := h.one(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "s#" + strconv.Itoa(n), Result: big}))
			if r.Err != nil {
				var je *fsm.JournalFullError
				if !errors.As(r.Err, &je) || je.Limit != "max_journal_bytes" || !strings.Contains(r.Err.Error(), "max_journal_bytes") {
					t.Fatalf("record %d: %v, want the journal full at max_journal_bytes", n, r.Err)
				}
				break
			}
		}
		if n != fsm.MaxJournalBytes/fsm.MaxStepResultBytes-1 {
			t.Fatalf("recorded %d big steps before the journal was full", n)
		}
	})

	t.Run("StepsPerJobAreBounded", func(t *testing.T) {
		if testing.Short() {
			t.Skip("records 10,000 steps")
		}
		h, j := running(t)
		cmds := make([]fsm.Cmd, 0, 1000)
		for i := range fsm.MaxStepsPerJob {
			cmds = append(cmds, recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "s#" + strconv.Itoa(i)}))
			if len(cmds) == cap(cmds) {
				h.do(cmds...)
				cmds = cmds[:0]
			}
		}
		r := h.reject(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "one-more"}), fsm.ErrJournalFull)
		if !strings.Contains(r.Err.Error(), "max_steps_per_job") {
			t.Fatalf("error %q names no limit", r.Err)
		}
		steps, tot, err := h.f.Steps(j.ID, "", 10)
		if err != nil || len(steps) != 10 || tot.Steps != fsm.MaxStepsPerJob {
			t.Fatalf("Steps = %d steps, totals %+v, %v", len(steps), tot, err)
		}
	})

	t.Run("ListingPagesInKeyOrderWithoutResults", func(t *testing.T) {
		h, j := running(t)
		for _, k := range []string{"c", "a", "b"} {
			h.ok(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: k, Result: []byte("xyz")}))
		}
		page, tot, err := h.f.Steps(j.ID, "", 2)
		if err != nil || len(page) != 2 || page[0].Key != "a" || page[1].Key != "b" || page[0].Result != nil || page[0].Size != 3 {
			t.Fatalf("first page %+v, %v", page, err)
		}
		if tot.Steps != 3 || tot.Bytes != 3*4 {
			t.Fatalf("totals %+v, want 3 steps of 4 bytes", tot)
		}
		page, _, _ = h.f.Steps(j.ID, "b", 2)
		if len(page) != 1 || page[0].Key != "c" {
			t.Fatalf("second page %+v", page)
		}
	})

	t.Run("TheJournalGoesWithItsJobAndSurvivesASnapshot", func(t *testing.T) {
		h, j := running(t)
		h.ok(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "a", Result: []byte("1")}))
		restored := snapshotRestore(t, h.f)
		if s, err := restored.Step(j.ID, "a"); err != nil || string(s.Result) != "1" {
			t.Fatalf("after a snapshot: %+v, %v", s, err)
		}
		if digest(t, restored) != digest(t, h.f) {
			t.Fatal("the restored digest differs")
		}
		h.ok(succeed(j.ID, j.Lease))
		h.at(2 * time.Hour).ok(deleteCmd(j.ID))
		if _, err := h.f.Step(j.ID, "a"); !errors.Is(err, fsm.ErrNotFound) {
			t.Fatalf("step of a deleted job: %v", err)
		}
		// A job of the same id starts with an empty journal.
		h.submit(fsm.NewJob{ID: j.ID, Command: "a"})
		steps, tot, err := h.f.Steps(j.ID, "", 10)
		if err != nil || len(steps) != 0 || tot != (store.JournalTotals{}) {
			t.Fatalf("a new job of the deleted one's id has steps %+v, totals %+v (%v)", steps, tot, err)
		}
	})

	t.Run("ADeleteStopsAtItsBudgetOfJournalSteps", func(t *testing.T) {
		fsm.SetMaxDeleteStepKeys(t, 5)
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Slots: 10}))
		var ids []string
		for i := range 4 {
			h.submit(fsm.NewJob{ID: "order-" + strconv.Itoa(i), Command: "a", Retention: int64(time.Minute)})
		}
		for _, j := range h.claim(fsm.Claim{WorkerID: "w1", Max: 4}) {
			ids = append(ids, j.ID)
			for k := range 3 {
				h.ok(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "s" + strconv.Itoa(k)}))
			}
			h.ok(succeed(j.ID, j.Lease))
		}
		// 3 steps each, 5 a delete: the first delete takes one job, the
		// second one more (always at least one), ...
		h.at(time.Hour)
		for want := range []int{1, 1, 1, 1} {
			if r := h.ok(deleteCmd(ids...)); r.Deleted != 1 {
				t.Fatalf("delete %d removed %d jobs, want 1", want, r.Deleted)
			}
		}
		if r := h.ok(deleteCmd(ids...)); r.Deleted != 0 {
			t.Fatalf("a delete after all were gone removed %d", r.Deleted)
		}
	})

	t.Run("TwoReplicasAgree", func(t *testing.T) {
		a, b := setup(t), setup(t)
		for _, h := range []*harness{a, b} {
			h.ok(register(store.Worker{ID: "w1", Slots: 1}))
			h.submit(fsm.NewJob{Command: "a"})
			j := h.claimOne("w1")
			h.ok(recordStep(fsm.RecordStep{JobID: j.ID, Lease: j.Lease, Key: "a", Result: []byte("r")}))
		}
		if digest(t, a.f) != digest(t, b.f) {
			t.Fatal("digests differ")
		}
	})

	t.Run("TheCommandRoundTripsAndNeedsProtocol4", func(t *testing.T) {
		c := recordStep(fsm.RecordStep{JobID: "job-1", Lease: 3, Key: "send#2", Result: []byte{0, 1, 2}, Failed: true, Attempts: 2, Duration: 7})
		if c.Protocol() != fsm.ProtocolSteps {
			t.Fatalf("protocol %d", c.Protocol())
		}
		data, err := fsm.Encode(&fsm.Entry{Now: 1, Cmds: []fsm.Cmd{c}})
		if err != nil {
			t.Fatal(err)
		}
		e, err := fsm.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		got := e.Cmds[0].RecordStep
		if got == nil || got.Key != "send#2" || string(got.Result) != "\x00\x01\x02" || !got.Failed || got.Attempts != 2 || got.Duration != 7 {
			t.Fatalf("decoded %+v", got)
		}
	})
}
