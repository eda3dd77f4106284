package fsm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// claimFair has worker claim up to n jobs with a Fair claim and returns
// their keys ("-" for a job without one), in claim order.
func (h *harness) claimFair(worker string, n int) []string {
	h.t.Helper()
	var keys []string
	for _, j := range h.claim(fsm.Claim{WorkerID: worker, Max: n, Fair: true}) {
		k := j.ConcurrencyKey
		if k == "" {
			k = "-"
		}
		keys = append(keys, k)
	}
	return keys
}

// pruneEntry is a prune_buckets entry (protocol 3, prune_test.go and
// protocol2_prune_test.go).
var pruneEntry = []byte("\x02\x02\x01\x00" + withLen(`{"op":"prune_buckets","prune":{"limit":1}}`))

// protocol3Entries are entries of the op codes and names this file's
// features add: a protocol 2 binary refuses them (protocol2_test.go).
var protocol3Entries = [][]byte{
	[]byte("\x02\x02\x01\x0c\x01w\x00\x00\x00\x00\x02\x00\x00\x00"),                                                           // op code 12, a fair claim
	[]byte("\x02\x02\x01\x0d\x05job-1\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x02\x00\x00\x00"), // op code 13
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"set_queue_limits_w","qlimits":{"name":"q","limits":{"key_w":{"a":2}}}}`)),
}

func TestFair(t *testing.T) {
	t.Run("Protocol3EntriesDecode", func(t *testing.T) {
		for _, data := range protocol3Entries {
			e, err := fsm.Decode(data)
			if err != nil {
				t.Fatalf("Decode of %q: %v", data, err)
			}
			if c := e.Cmds[0]; c.Protocol() != 3 {
				t.Errorf("%s decoded from %q needs protocol %d, want 3", c.Op, data, c.Protocol())
			}
		}
	})

	t.Run("ClaimsRotateOverKeysNotByPriority", func(t *testing.T) {
		h := setup(t)
		// big has many jobs of a higher priority; small's one still comes
		// within a turn.
		for range 20 {
			h.submit(keyed("big", 9))
		}
		h.submit(keyed("small", 0), fsm.NewJob{Command: "plain"})
		got := h.claimFair("w", 4)
		if want := "- big small big"; strings.Join(got, " ") != want {
			t.Fatalf("claimed keys %v, want %s", got, want)
		}
	})

	t.Run("WeightsGiveAKeyMoreClaimsInARow", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyWeights: map[string]int{"acme": 3}}))
		for range 10 {
			h.submit(keyed("acme", 0), keyed("beta", 0))
		}
		got := h.claimFair("w", 8)
		if want := "acme acme acme beta acme acme acme beta"; strings.Join(got, " ") != want {
			t.Fatalf("claimed keys %v, want %s", got, want)
		}
	})

	t.Run("PrioritiesOrderJobsWithinAKey", func(t *testing.T) {
		h := setup(t)
		jobs := h.submit(keyed("a", 1), keyed("a", 5), keyed("b", 0))
		got := h.claim(fsm.Claim{WorkerID: "w", Max: 3, Fair: true})
		if ids := jobIDs(got); ids[0] != jobs[1].ID || ids[1] != jobs[2].ID || ids[2] != jobs[0].ID {
			t.Fatalf("claimed %v, want a's priority 5, then b, then a's priority 1", ids)
		}
	})

	t.Run("RotationSurvivesASnapshot", func(t *testing.T) {
		h := setup(t)
		for range 3 {
			h.submit(keyed("a", 0), keyed("b", 0), keyed("c", 0))
		}
		if got := h.claimFair("w", 2); strings.Join(got, " ") != "a b" {
			t.Fatalf("claimed %v, want a b", got)
		}
		h.f = snapshotRestore(t, h.f)
		if r := h.f.Rotation(fsm.DefaultQueue); r.Key != "b" || r.Used != 1 {
			t.Fatalf("rotation after restore %+v, want b used 1", r)
		}
		if got := h.claimFair("w", 2); strings.Join(got, " ") != "c a" {
			t.Fatalf("claimed %v after a restore, want c a", got)
		}
	})

	t.Run("AClaimWithoutFairPicksByPriority", func(t *testing.T) {
		h := setup(t)
		h.submit(keyed("a", 0), keyed("b", 9), keyed("b", 9))
		got := h.claim(fsm.Claim{WorkerID: "w", Max: 2})
		if got[0].ConcurrencyKey != "b" || got[1].ConcurrencyKey != "b" {
			t.Fatalf("claimed %v, want both of b's by priority", jobIDs(got))
		}
		if r := h.f.Rotation(fsm.DefaultQueue); r != (store.Rotation{}) {
			t.Errorf("a claim without Fair moved the rotation to %+v", r)
		}
	})

	t.Run("AKeyAtItsLimitLosesItsTurn", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1}))
		for range 3 {
			h.submit(keyed("a", 0), keyed("b", 0), keyed("c", 0))
		}
		if got := h.claimFair("w", 10); strings.Join(got, " ") != "a b c" {
			t.Fatalf("claimed %v, want one of each key", got)
		}
	})

	t.Run("WeightsAreCheckedAndNeedProtocol3", func(t *testing.T) {
		h := setup(t)
		for _, ws := range []map[string]int{{"a": 0}, {"a": fsm.MaxKeyWeight + 1}, {"": 2}} {
			r := h.one(setLimits("q", store.QueueLimits{KeyWeights: ws}))
			var ve *fsm.ValidationError
			if !errors.As(r.Err, &ve) || !strings.HasPrefix(ve.Field, "key_weights") {
				t.Errorf("weights %v: err %v, want a ValidationError of key_weights", ws, r.Err)
			}
		}
		c := setLimits("q", store.QueueLimits{KeyWeights: map[string]int{"a": 2}})
		if p := c.Protocol(); p != fsm.ProtocolFair {
			t.Errorf("protocol of weights %d, want %d", p, fsm.ProtocolFair)
		}
		fairClaim, plainClaim := claimCmd(fsm.Claim{WorkerID: "w", Fair: true}), claimCmd(fsm.Claim{WorkerID: "w"})
		if p := fairClaim.Protocol(); p != fsm.ProtocolFair {
			t.Errorf("protocol of a fair claim %d, want %d", p, fsm.ProtocolFair)
		}
		if p := plainClaim.Protocol(); p >= fsm.ProtocolFair {
			t.Errorf("protocol of a plain claim %d, want below %d", p, fsm.ProtocolFair)
		}
	})
}

func TestBackpressure(t *testing.T) {
	rateLimited := func(j *store.Job, d time.Duration, why string) fsm.Cmd {
		return report(fsm.Report{JobID: j.ID, Lease: j.Lease, Error: why, RateLimitedFor: int64(d)})
	}

	t.Run("RateLimitedPausesTheKeyForEveryWorkerAndUsesNoAttempt", func(t *testing.T) {
		h := setup(t)
		jobs := h.submit(fsm.NewJob{Command: "x", ConcurrencyKey: "acme", MaxAttempts: 1}, keyed("acme", 0), keyed("beta", 0))
		j := h.claim(fsm.Claim{WorkerID: "w1", Fair: true})[0]
		if j.ID != jobs[0].ID {
			t.Fatalf("claimed %s, want %s", j.ID, jobs[0].ID)
		}
		h.ok(rateLimited(j, time.Minute, "429 from api"))
		got := h.job(j.ID)
		if got.Status != store.StatusPending || got.Attempts != 0 {
			t.Fatalf("after rate-limited: status %s attempts %d, want pending with 0", got.Status, got.Attempts)
		}
		if at := got.History[len(got.History)-1]; at.Status != store.StatusRateLimited || at.Error != "429 from api" {
			t.Errorf("history %+v, want rate_limited with the reason", at)
		}
		want := "key acme rate-limited until " + h.now.Add(time.Minute).UTC().Format(time.RFC3339Nano) + " (429 from api)"
		if by := h.f.HeldBy(got, ns(h.now)); by != want {
			t.Errorf("held by %q, want %q", by, want)
		}
		// Another worker gets beta only, until the pause ends.
		if ids := jobIDs(h.claim(fsm.Claim{WorkerID: "w2", Max: 5, Fair: true})); len(ids) != 1 || ids[0] != jobs[2].ID {
			t.Fatalf("claimed %v while acme is paused, want [%s]", ids, jobs[2].ID)
		}
		fl := h.f.QueueLimits(fsm.DefaultQueue)
		if len(fl.Paused) != 1 || fl.Paused[0].Key != "acme" || fl.Paused[0].Until != ns(h.now.Add(time.Minute)) || fl.Held["key_paused"] != 2 {
			t.Errorf("flow %+v, want acme paused a minute holding 2", fl)
		}
		h.f = snapshotRestore(t, h.f)
		h.at(59 * time.Second)
		if ids := h.claimN("w2", 5); len(ids) != 0 {
			t.Fatalf("claimed %v before the pause ends (after a restore), want none", ids)
		}
		h.at(time.Minute)
		if ids := h.claimN("w2", 5); len(ids) != 2 {
			t.Fatalf("claimed %v when the pause ends, want acme's 2", ids)
		}
		if fl := h.f.QueueLimits(fsm.DefaultQueue); len(fl.Paused) != 0 {
			t.Errorf("pauses %+v after they ended", fl.Paused)
		}
		if got := h.job(j.ID); got.Attempts != 1 {
			t.Errorf("attempts %d after the next claim, want 1", got.Attempts)
		}
	})

	t.Run("RateLimitedWithoutAKeyPausesTheQueue", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", Queue: "q"}, fsm.NewJob{Command: "y", Queue: "q"}, fsm.NewJob{Command: "z"})
		j := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"q"}})[0]
		h.ok(rateLimited(j, time.Second, ""))
		if ids := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"q", fsm.DefaultQueue}, Max: 5}); len(ids) != 1 || ids[0].Queue != fsm.DefaultQueue {
			t.Fatalf("claimed %v while q is paused, want default's job only", jobIDs(ids))
		}
		if by := h.f.HeldBy(h.job(j.ID), ns(h.now)); !strings.HasPrefix(by, "queue q rate-limited until") {
			t.Errorf("held by %q", by)
		}
	})

	t.Run("ALaterPauseIsNotShortenedByAnEarlierOne", func(t *testing.T) {
		h := setup(t)
		h.submit(keyed("k", 0), keyed("k", 0), keyed("k", 0))
		js := h.claim(fsm.Claim{WorkerID: "w", Max: 2})
		h.ok(rateLimited(js[0], time.Hour, "long"))
		h.ok(rateLimited(js[1], time.Second, "short"))
		h.at(time.Minute)
		if ids := h.claimN("w", 5); len(ids) != 0 {
			t.Fatalf("claimed %v within the longer pause", ids)
		}
	})

	t.Run("SnoozeRunsAgainLaterWithoutAnAttemptOrPause", func(t *testing.T) {
		h := setup(t)
		jobs := h.submit(fsm.NewJob{Command: "x", ConcurrencyKey: "k", MaxAttempts: 1}, keyed("k", 0))
		j := h.claimOne("w")
		h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, SnoozeFor: int64(time.Minute)}))
		got := h.job(j.ID)
		if got.Status != store.StatusPending || got.Attempts != 0 || got.RunAt != ns(h.now.Add(time.Minute)) {
			t.Fatalf("after a snooze: %s attempts %d run_at %d, want pending, 0, a minute on", got.Status, got.Attempts, got.RunAt)
		}
		if at := got.History[len(got.History)-1]; at.Status != store.StatusSnoozed {
			t.Errorf("history %+v, want snoozed", at)
		}
		if ids := h.claimN("w", 5); len(ids) != 1 || ids[0] != jobs[1].ID {
			t.Fatalf("claimed %v, want the key's other job (no pause)", ids)
		}
	})

	t.Run("BadFieldsAreRefused", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claimOne("w")
		for _, r := range []fsm.Report{
			{JobID: j.ID, Lease: j.Lease, RateLimitedFor: -1},
			{JobID: j.ID, Lease: j.Lease, RateLimitedFor: fsm.MaxPause + 1},
			{JobID: j.ID, Lease: j.Lease, SnoozeFor: fsm.MaxPause + 1},
			{JobID: j.ID, Lease: j.Lease, SnoozeFor: 1, RateLimitedFor: 1},
			{JobID: j.ID, Lease: j.Lease, Success: true, SnoozeFor: 1},
		} {
			var ve *fsm.ValidationError
			if res := h.reject(report(r), nil); !errors.As(res.Err, &ve) {
				t.Errorf("report %+v: err %v, want a ValidationError", r, res.Err)
			}
		}
		snooze := report(fsm.Report{JobID: "j", SnoozeFor: 1})
		if p := snooze.Protocol(); p != fsm.ProtocolBackpressure {
			t.Errorf("protocol of a snooze %d, want %d", p, fsm.ProtocolBackpressure)
		}
	})
}
