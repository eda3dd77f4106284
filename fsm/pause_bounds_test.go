//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// capped is a capped report of an attempt of j: rate-limited for rl or
// snoozed for snooze.
func capped(j *store.Job, rl, snooze time.Duration) fsm.Cmd {
	return report(fsm.Report{JobID: j.ID, Lease: j.Lease, Error: "429", RateLimitedFor: int64(rl), SnoozeFor: int64(snooze), Capped: true})
}

func liftPauses(l fsm.LiftPauses) fsm.Cmd { return fsm.Cmd{Op: fsm.OpLiftPauses, LiftPauses: &l} }

func TestPauseBounds(t *testing.T) {
	t.Run("EntriesOfProtocol4Decode", func(t *testing.T) {
		for _, data := range protocol4PauseEntries {
			e, err := fsm.Decode(data)
			if err != nil {
				t.Fatalf("Decode of %q: %v", data, err)
			}
			if c := e.Cmds[0]; c.Protocol() != fsm.ProtocolPauses {
				t.Errorf("%s decoded from %q needs protocol %d, want %d", c.Op, data, c.Protocol(), fsm.ProtocolPauses)
			}
		}
		if e := mustDecode(t, protocol4PauseEntries[0]); !e.Cmds[0].Report.Capped || e.Cmds[0].Report.SnoozeFor != 1 {
			t.Errorf("op code 17 read as %+v, want a capped snooze", e.Cmds[0].Report)
		}
	})

	t.Run("PauseSettingsAreRefusedUnderTheOlderNames", func(t *testing.T) {
		for _, js := range []string{
			`{"op":"set_queue_limits","qlimits":{"name":"q","limits":{"max_pause":5}}}`,
			`{"op":"set_queue_limits_w","qlimits":{"name":"q","limits":{"key_w":{"a":2},"pause_q":true}}}`,
			`{"op":"set_queue_limits_p","qlimits":{"name":"q","limits":{"conc":2}}}`,
		} {
			if _, err := fsm.Decode([]byte("\x02\x02\x01\x00" + withLen(js))); err == nil {
				t.Errorf("Decode of %s: accepted", js)
			}
		}
	})

	t.Run("ACappedRateLimitWithoutAKeyHoldsOnlyItsJob", func(t *testing.T) {
		h := setup(t)
		jobs := h.submit(fsm.NewJob{Command: "x", Queue: "q"}, fsm.NewJob{Command: "y", Queue: "q"})
		j := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"q"}})[0]
		h.ok(capped(j, 24*time.Hour, 0))
		got := h.job(j.ID)
		if got.Status != store.StatusPending || got.Attempts != 0 || got.RunAt != ns(h.now)+fsm.DefaultMaxPause {
			t.Fatalf("job %s attempts %d run_at %d, want pending, 0, max_pause on", got.Status, got.Attempts, got.RunAt)
		}
		if fl := h.f.QueueLimits("q"); len(fl.Paused) != 0 {
			t.Errorf("pauses %+v, want none: the queue setting is off", fl.Paused)
		}
		if ids := h.claimQ("w2", "q"); len(ids) != 1 || ids[0] != jobs[1].ID {
			t.Fatalf("claimed %v, want the queue's other job %s", ids, jobs[1].ID)
		}
	})

	t.Run("TheQueueSettingLetsItPauseTheQueueForAtMostMaxPause", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits("q", store.QueueLimits{PauseQueue: true, MaxPause: int64(time.Minute)}))
		h.submit(fsm.NewJob{Command: "x", Queue: "q"}, fsm.NewJob{Command: "y", Queue: "q"})
		j := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"q"}})[0]
		h.ok(capped(j, time.Hour, 0))
		fl := h.f.QueueLimits("q")
		if len(fl.Paused) != 1 || fl.Paused[0].Key != "" || fl.Paused[0].Until != ns(h.now.Add(time.Minute)) {
			t.Fatalf("pauses %+v, want the queue's, a minute", fl.Paused)
		}
		h.f = snapshotRestore(t, h.f)
		if l := h.f.QueueLimits("q").Limits; !l.PauseQueue || l.MaxPause != int64(time.Minute) {
			t.Errorf("settings after a restore %+v", l)
		}
		h.at(59 * time.Second)
		if ids := h.claimQ("w", "q"); len(ids) != 0 {
			t.Fatalf("claimed %v while the queue is paused", ids)
		}
		h.at(time.Minute)
		if ids := h.claimQ("w", "q"); len(ids) != 2 {
			t.Fatalf("claimed %v when the pause ends, want 2", ids)
		}
	})

	t.Run("AKeyPauseIsCappedAtMaxPause", func(t *testing.T) {
		h := setup(t)
		h.submit(keyed("acme", 0), keyed("acme", 0), fsm.NewJob{Command: "plain"})
		j := h.claimOne("w")
		if j.ConcurrencyKey != "acme" {
			t.Fatalf("claimed %s of key %q first", j.ID, j.ConcurrencyKey)
		}
		h.ok(capped(j, 24*time.Hour, 0))
		fl := h.f.QueueLimits(fsm.DefaultQueue)
		if len(fl.Paused) != 1 || fl.Paused[0].Key != "acme" || fl.Paused[0].Until != ns(h.now)+fsm.DefaultMaxPause {
			t.Fatalf("pauses %+v, want acme's for the default max_pause", fl.Paused)
		}
		if ids := h.claimN("w", 5); len(ids) != 1 {
			t.Fatalf("claimed %v, want the job without a key only", ids)
		}
	})

	t.Run("AnUncappedReportStillPausesTheQueue", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", Queue: "q"})
		j := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"q"}})[0]
		h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, RateLimitedFor: int64(24 * time.Hour)}))
		if fl := h.f.QueueLimits("q"); len(fl.Paused) != 1 || fl.Paused[0].Until != ns(h.now.Add(24*time.Hour)) {
			t.Fatalf("pauses %+v, want the queue's for 24h (the protocol 3 rule)", fl.Paused)
		}
	})

	t.Run("LiftingEndsPausesEarly", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits("q", store.QueueLimits{PauseQueue: true}))
		h.submit(fsm.NewJob{Command: "x", Queue: "q"}, fsm.NewJob{Command: "y", Queue: "q"})
		h.submit(fsm.NewJob{Command: "a", Queue: "q", ConcurrencyKey: "a"}, fsm.NewJob{Command: "b", Queue: "q", ConcurrencyKey: "b"})
		js := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"q"}, Max: 4})
		for _, j := range js {
			h.ok(capped(j, time.Minute, 0))
		}
		if got := h.f.QueueLimits("q").Paused; len(got) != 3 {
			t.Fatalf("pauses %+v, want the queue's and two keys'", got)
		}
		all, n := h.f.Pauses(ns(h.now), nil, 2)
		if len(all) != 2 || n != 3 || all[0].Queue != "q" || all[0].Key != "" || all[1].Key != "a" {
			t.Fatalf("Pauses(limit 2) = %+v, %d; want the queue's then a's, of 3", all, n)
		}
		if rest, n := h.f.Pauses(ns(h.now), &all[1], 2); len(rest) != 1 || n != 3 || rest[0].Key != "b" {
			t.Errorf("Pauses(after a, limit 2) = %+v, %d; want b's only, of 3", rest, n)
		}
		if r := h.ok(liftPauses(fsm.LiftPauses{Queue: "q", Key: "a"})); r.Deleted != 1 {
			t.Errorf("lifted %d pauses of key a, want 1", r.Deleted)
		}
		if r := h.ok(liftPauses(fsm.LiftPauses{Queue: "q", Key: "nope"})); r.Deleted != 0 {
			t.Errorf("lifted %d pauses of a key without one", r.Deleted)
		}
		if got := h.f.QueueLimits("q").Paused; len(got) != 2 || got[1].Key != "b" {
			t.Fatalf("pauses %+v after lifting a's", got)
		}
		if r := h.ok(liftPauses(fsm.LiftPauses{Queue: "q", All: true})); r.Deleted != 2 {
			t.Errorf("lifted %d, want the queue's and b's", r.Deleted)
		}
		h.f = snapshotRestore(t, h.f)
		if got := h.f.QueueLimits("q").Paused; len(got) != 0 {
			t.Fatalf("pauses %+v after lifting all and a restore", got)
		}
		if ids := h.claimQ("w", "q"); len(ids) != 4 {
			t.Fatalf("claimed %v after the lift, want all 4", ids)
		}
		h.reject(liftPauses(fsm.LiftPauses{Queue: ""}), nil)
		h.reject(liftPauses(fsm.LiftPauses{Queue: "q", Key: "a", All: true}), nil)
	})

	t.Run("ALiftedPauseCanBeSetAgain", func(t *testing.T) {
		h := setup(t)
		h.submit(keyed("k", 0), keyed("k", 0), keyed("k", 0))
		j := h.claimOne("w")
		h.ok(capped(j, time.Minute, 0))
		h.ok(liftPauses(fsm.LiftPauses{Queue: fsm.DefaultQueue, Key: "k"}))
		j = h.claimOne("w")
		h.ok(capped(j, time.Second, 0))
		if ids := h.claimN("w", 5); len(ids) != 0 {
			t.Fatalf("claimed %v within the new pause", ids)
		}
		h.at(time.Second)
		if ids := h.claimN("w", 5); len(ids) != 3 {
			t.Fatalf("claimed %v when the new (shorter) pause ends, want 3", ids)
		}
	})

	t.Run("HoldOffsPastTheCeilingCountAsAttempts", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "x", MaxAttempts: 2})[0]
		// Snoozes and rate limits both count toward the run.
		for i := range fsm.MaxHoldOffs {
			c := h.claimOne("w")
			if i%2 == 0 {
				h.ok(capped(c, 0, time.Millisecond))
			} else {
				h.ok(capped(c, time.Millisecond, 0))
			}
			h.at(time.Duration(i+1) * time.Second)
		}
		if got := h.job(j.ID); got.Attempts != 0 || got.Status != store.StatusPending {
			t.Fatalf("after %d hold-offs: %s attempts %d, want pending with 0", fsm.MaxHoldOffs, got.Status, got.Attempts)
		}
		h.ok(capped(h.claimOne("w"), 0, time.Millisecond))
		got := h.job(j.ID)
		if got.Attempts != 1 || got.Status != store.StatusPending || !strings.Contains(got.LastError, "counted as an attempt") {
			t.Fatalf("hold-off %d: %s attempts %d %q, want pending, 1 attempt used", fsm.MaxHoldOffs+1, got.Status, got.Attempts, got.LastError)
		}
		h.at(time.Hour)
		h.ok(capped(h.claimOne("w"), 0, time.Millisecond))
		if got := h.job(j.ID); got.Status != store.StatusFailed || got.Attempts != 2 {
			t.Fatalf("with no attempt left: %s attempts %d, want failed", got.Status, got.Attempts)
		}
	})

	t.Run("UncappedSnoozesHaveNoCeiling", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1})[0]
		for i := range fsm.MaxHoldOffs + 5 {
			c := h.claimOne("w")
			h.ok(report(fsm.Report{JobID: c.ID, Lease: c.Lease, SnoozeFor: 1}))
			h.at(time.Duration(i+1) * time.Second)
		}
		if got := h.job(j.ID); got.Attempts != 0 || got.Status != store.StatusPending {
			t.Fatalf("%s attempts %d, want pending with 0 (the protocol 3 rule)", got.Status, got.Attempts)
		}
	})

	t.Run("SettingsAreCheckedAndNeedProtocol4", func(t *testing.T) {
		h := setup(t)
		for _, l := range []store.QueueLimits{{MaxPause: -1}, {MaxPause: fsm.MaxPause + 1}} {
			var ve *fsm.ValidationError
			if r := h.one(setLimits("q", l)); !errors.As(r.Err, &ve) || ve.Field != "max_pause" {
				t.Errorf("limits %+v: err %v, want a ValidationError of max_pause", l, r.Err)
			}
		}
		for name, c := range map[string]fsm.Cmd{
			"PauseQueue":    setLimits("q", store.QueueLimits{PauseQueue: true}),
			"MaxPause":      setLimits("q", store.QueueLimits{MaxPause: 1, KeyWeights: map[string]int{"a": 2}}),
			"CappedReport":  report(fsm.Report{JobID: "j", SnoozeFor: 1, Capped: true}),
			"CappedNothing": report(fsm.Report{JobID: "j", Capped: true}),
			"Lift":          liftPauses(fsm.LiftPauses{Queue: "q"}),
		} {
			if p := c.Protocol(); p != fsm.ProtocolPauses {
				t.Errorf("%s: protocol %d, want %d", name, p, fsm.ProtocolPauses)
			}
			e := &fsm.Entry{Now: 1, Cmds: []fsm.Cmd{c}}
			if got := mustDecode(t, mustEncode(t, e)); got.Cmds[0].Protocol() != fsm.ProtocolPauses {
				t.Errorf("%s: read back as protocol %d", name, got.Cmds[0].Protocol())
			}
		}
	})
}

// claimQ has worker claim up to 10 jobs of queue q and returns their ids.
func (h *harness) claimQ(worker, q string) []string {
	h.t.Helper()
	return jobIDs(h.claim(fsm.Claim{WorkerID: worker, Queues: []string{q}, Max: 10}))
}
