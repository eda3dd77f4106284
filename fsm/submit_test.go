package fsm_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func TestSubmit(t *testing.T) {
	t.Run("SingleJobGetsTheFirstIDAndDefaults", func(t *testing.T) {
		h := setup(t).at(time.Second)
		r := h.ok(submit(fsm.NewJob{Command: "echo hi"}))
		if r.Existing || len(r.Jobs) != 1 {
			t.Fatalf("result = existing %v, %d jobs; want a new job", r.Existing, len(r.Jobs))
		}
		want := &store.Job{
			ID:          "job-1",
			Seq:         1,
			Command:     "echo hi",
			Queue:       fsm.DefaultQueue,
			Status:      store.StatusPending,
			MaxAttempts: 1,
			CreatedAt:   ns(h.now),
			RunAt:       ns(h.now),
			ModifyIndex: 1,
		}
		if !reflect.DeepEqual(r.Jobs[0], want) {
			t.Fatalf("result job = %+v\nwant %+v", r.Jobs[0], want)
		}
		if got := h.job("job-1"); !reflect.DeepEqual(got, want) {
			t.Fatalf("stored job = %+v\nwant %+v", got, want)
		}
	})

	t.Run("EveryFieldIsKept", func(t *testing.T) {
		h := setup(t)
		nj := fsm.NewJob{
			Type:           "resize",
			Payload:        json.RawMessage(`{"w":100}`),
			Env:            map[string]string{"A": "1"},
			Metadata:       map[string]string{"team": "img"},
			Queue:          "media",
			Priority:       7,
			MaxAttempts:    4,
			IdempotencyKey: "k",
			Timeout:        int64(time.Minute),
			Backoff:        store.Backoff{Base: int64(time.Second), Max: int64(time.Minute), Jitter: 0.25},
			RunAt:          ns(t0.Add(time.Hour)),
		}
		j := h.submit(nj)[0]
		got := h.job(j.ID)
		if got.Type != nj.Type || string(got.Payload) != string(nj.Payload) || !reflect.DeepEqual(got.Env, nj.Env) ||
			!reflect.DeepEqual(got.Metadata, nj.Metadata) || got.Queue != nj.Queue || got.Priority != nj.Priority ||
			got.MaxAttempts != nj.MaxAttempts || got.IdempotencyKey != nj.IdempotencyKey || got.Timeout != nj.Timeout ||
			got.Backoff != nj.Backoff || got.RunAt != nj.RunAt || got.CreatedAt != ns(t0) {
			t.Fatalf("stored job = %+v\nfrom %+v", got, nj)
		}
	})

	t.Run("RunAtInThePastStartsNow", func(t *testing.T) {
		h := setup(t).at(time.Minute)
		j := h.submit(fsm.NewJob{Command: "x", RunAt: ns(t0)})[0]
		if j.RunAt != ns(h.now) {
			t.Fatalf("RunAt = %d, want now %d", j.RunAt, ns(h.now))
		}
	})

	t.Run("IDsFollowSubmissionOrderAcrossEntries", func(t *testing.T) {
		h := setup(t)
		got := jobIDs(h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, fsm.NewJob{Command: "c"}))
		got = append(got, jobIDs(h.submit(fsm.NewJob{Command: "d"}))...)
		// Two submits packed into one entry.
		for _, r := range h.do(submit(fsm.NewJob{Command: "e"}), submit(fsm.NewJob{Command: "f"})) {
			got = append(got, jobIDs(r.Jobs)...)
		}
		if want := []string{"job-1", "job-2", "job-3", "job-4", "job-5", "job-6"}; !slices.Equal(got, want) {
			t.Fatalf("ids = %v, want %v", got, want)
		}
	})

	t.Run("ExplicitIDIsUsed", func(t *testing.T) {
		h := setup(t)
		if id := h.submit(fsm.NewJob{ID: "nightly-build", Command: "make"})[0].ID; id != "nightly-build" {
			t.Fatalf("id = %q, want nightly-build", id)
		}
		if id := h.submit(fsm.NewJob{Command: "x"})[0].ID; id != "job-2" {
			t.Fatalf("next generated id = %q, want job-2", id)
		}
	})

	t.Run("BatchRefsCreateBlockedDependents", func(t *testing.T) {
		h := setup(t)
		jobs := h.submit(
			fsm.NewJob{Command: "fetch"},
			fsm.NewJob{Command: "build", DependsOn: []string{"$0"}},
			fsm.NewJob{Command: "ship", DependsOn: []string{"$0", "$1", "$1"}},
		)
		if got := jobIDs(jobs); !slices.Equal(got, []string{"job-1", "job-2", "job-3"}) {
			t.Fatalf("ids = %v", got)
		}
		a, b, c := h.job("job-1"), h.job("job-2"), h.job("job-3")
		if got := h.dependents("job-1"); a.Status != store.StatusPending || !slices.Equal(got, []string{"job-2", "job-3"}) {
			t.Errorf("job-1 = %s dependents %v, want pending [job-2 job-3]", a.Status, got)
		}
		if got := h.dependents("job-2"); b.Status != store.StatusBlocked || b.Waiting != 1 || !slices.Equal(b.DependsOn, []string{"job-1"}) || !slices.Equal(got, []string{"job-3"}) {
			t.Errorf("job-2 = %s waiting %d deps %v dependents %v, want blocked 1 [job-1] [job-3]", b.Status, b.Waiting, b.DependsOn, got)
		}
		if c.Status != store.StatusBlocked || c.Waiting != 2 || !slices.Equal(c.DependsOn, []string{"job-1", "job-2"}) {
			t.Errorf("job-3 = %s waiting %d deps %v, want blocked 2 [job-1 job-2] (a repeated ref counts once)", c.Status, c.Waiting, c.DependsOn)
		}
		if closed := h.f.Claimable(nil, nil, false, ns(h.now)); !closed {
			t.Error("the root job is not claimable")
		}
	})

	t.Run("ABatchRefMayPointForward", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "after", DependsOn: []string{"$1"}}, fsm.NewJob{Command: "first"})
		h.status(store.StatusBlocked, "job-1")
		h.status(store.StatusPending, "job-2")
		if got := h.dependents("job-2"); !slices.Equal(got, []string{"job-1"}) {
			t.Fatalf("job-2 dependents = %v, want [job-1]", got)
		}
	})

	t.Run("DependingOnAStoredJob", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"})
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.submit(fsm.NewJob{Command: "after done", DependsOn: []string{"job-1"}})
		h.submit(fsm.NewJob{Command: "after pending", DependsOn: []string{"job-2"}})
		c, d := h.job("job-3"), h.job("job-4")
		if c.Status != store.StatusPending || c.Waiting != 0 || !slices.Equal(c.DependsOn, []string{"job-1"}) {
			t.Errorf("dependent of a done job = %s waiting %d deps %v, want pending 0 [job-1]", c.Status, c.Waiting, c.DependsOn)
		}
		if d.Status != store.StatusBlocked || d.Waiting != 1 {
			t.Errorf("dependent of a pending job = %s waiting %d, want blocked 1", d.Status, d.Waiting)
		}
		if got := h.dependents("job-1"); !slices.Equal(got, []string{"job-3"}) {
			t.Errorf("job-1 dependents = %v, want [job-3]", got)
		}
		// The parent's record is not rewritten: the edge is stored apart.
		if got, deps := h.job("job-2"), h.dependents("job-2"); !slices.Equal(deps, []string{"job-4"}) || got.ModifyIndex == h.index || len(got.Dependents) != 0 {
			t.Errorf("job-2 dependents %v mod %d record list %v, want [job-4], not stamped %d, empty", deps, got.ModifyIndex, got.Dependents, h.index)
		}
	})

	t.Run("IdempotencyKeyReturnsTheFirstJob", func(t *testing.T) {
		h := setup(t)
		first := h.submit(fsm.NewJob{Command: "charge card", IdempotencyKey: "order-7"})[0]
		h.ok(succeed(h.claimOne("w").ID, 0))
		before := jobsJSON(t, h.f)
		r := h.at(time.Minute).ok(submit(fsm.NewJob{Command: "charge card again", IdempotencyKey: "order-7"}))
		if !r.Existing || len(r.Jobs) != 1 || r.Jobs[0].ID != first.ID || r.Jobs[0].Command != "charge card" {
			t.Fatalf("second submit = existing %v jobs %v, want the first job back", r.Existing, jobIDs(r.Jobs))
		}
		if r.Jobs[0].Status != store.StatusDone {
			t.Errorf("returned job status %s, want its current status done", r.Jobs[0].Status)
		}
		if jobsJSON(t, h.f) != before {
			t.Fatal("a repeated submit changed the jobs")
		}
		if id := h.submit(fsm.NewJob{Command: "x"})[0].ID; id != "job-2" {
			t.Fatalf("next id = %s, want job-2 (a repeat must not use up a number)", id)
		}
	})

	t.Run("BatchWithOneKnownKeyCreatesOnlyTheRest", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a", IdempotencyKey: "a"})
		r := h.ok(submit(
			fsm.NewJob{Command: "a", IdempotencyKey: "a"},
			fsm.NewJob{Command: "b", IdempotencyKey: "b", DependsOn: []string{"$0"}},
		))
		if r.Existing || !slices.Equal(jobIDs(r.Jobs), []string{"job-1", "job-2"}) {
			t.Fatalf("result = existing %v jobs %v, want new, [job-1 job-2]", r.Existing, jobIDs(r.Jobs))
		}
		if b := h.job("job-2"); b.Status != store.StatusBlocked || !slices.Equal(b.DependsOn, []string{"job-1"}) {
			t.Errorf("job-2 = %s deps %v, want blocked on job-1", b.Status, b.DependsOn)
		}
		if got := h.dependents("job-1"); !slices.Equal(got, []string{"job-2"}) {
			t.Errorf("job-1 dependents = %v, want [job-2]", got)
		}
		// The whole batch again: nothing new.
		r = h.ok(submit(fsm.NewJob{IdempotencyKey: "a"}, fsm.NewJob{IdempotencyKey: "b", DependsOn: []string{"$0"}}))
		if !r.Existing || !slices.Equal(jobIDs(r.Jobs), []string{"job-1", "job-2"}) {
			t.Fatalf("repeat = existing %v jobs %v, want existing [job-1 job-2]", r.Existing, jobIDs(r.Jobs))
		}
		if n := len(allJobs(t, h.f)); n != 2 {
			t.Fatalf("%d jobs, want 2", n)
		}
	})
}

// TestSubmitRejections checks that a bad submit is refused whole: no job is
// created or changed and no job number is used up, but the entry still
// counts as applied.
func TestSubmitRejections(t *testing.T) {
	// job-1 done, job-2 failed, job-3 cancelled, job-4 pending.
	prepare := func(t *testing.T) *harness {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "done"}, fsm.NewJob{Command: "failed"}, fsm.NewJob{Command: "cancelled"}, fsm.NewJob{Command: "pending"})
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.ok(fail(h.claimOne("w").ID, 0, "boom"))
		h.ok(cancel("job-3", false))
		h.status(store.StatusDone, "job-1")
		h.status(store.StatusFailed, "job-2")
		h.status(store.StatusCancelled, "job-3")
		h.status(store.StatusPending, "job-4")
		return h
	}
	job := func(deps ...string) fsm.NewJob { return fsm.NewJob{Command: "x", DependsOn: deps} }
	chain := func(n int) []fsm.NewJob { // $0 -> $1 -> ... -> $n-1 -> $0
		jobs := make([]fsm.NewJob, n)
		for i := range jobs {
			jobs[i] = job("$" + strconv.Itoa((i+1)%n))
		}
		return jobs
	}
	cases := []struct {
		name   string
		jobs   []fsm.NewJob
		field  string
		reason string
	}{
		{"NoJobs", nil, "jobs", "no jobs"},
		{"UnknownDependency", []fsm.NewJob{job("job-99")}, "depends_on", "unknown job job-99"},
		{"FailedDependency", []fsm.NewJob{job("job-2")}, "depends_on", "job-2 has already failed"},
		{"CancelledDependency", []fsm.NewJob{job("job-3")}, "depends_on", "job-3 has already cancelled"},
		{"BatchRefOutOfRange", []fsm.NewJob{job(), job("$2")}, "depends_on", `"$2" does not name`},
		{"BatchRefNotANumber", []fsm.NewJob{job(), job("$x")}, "depends_on", `"$x" does not name`},
		{"NegativeBatchRef", []fsm.NewJob{job(), job("$-1")}, "depends_on", `"$-1" does not name`},
		{"BatchRefToItself", []fsm.NewJob{job("$0")}, "depends_on", "$0 -> $0"},
		{"TwoJobCycle", []fsm.NewJob{job("$1"), job("$0")}, "depends_on", "dependency cycle $0 -> $1 -> $0"},
		{"CycleBehindAValidJob", []fsm.NewJob{job(), job("$0", "$2"), job("$3"), job("$1")}, "depends_on", "dependency cycle $1 -> $2 -> $3 -> $1"},
		// The walks from each root share one path buffer: a deep walk first
		// must not show in a later cycle, nor a path longer than the buffer.
		{"CycleAfterADeepWalk", []fsm.NewJob{job("$1"), job("$2"), job(), job("$4"), job("$3")}, "depends_on", "dependency cycle $3 -> $4 -> $3"},
		{"LongCycle", chain(20), "depends_on", "dependency cycle $0 -> $1 -> $2 -> $3 -> $4 -> $5 -> $6 -> $7 -> $8 -> $9 -> $10 -> $11 -> $12 -> $13 -> $14 -> $15 -> $16 -> $17 -> $18 -> $19 -> $0"},
		{"ExplicitIDInUse", []fsm.NewJob{{ID: "job-4", Command: "x"}}, "jobs[0].id", "already exists"},
		{"ExplicitIDTwiceInOneBatch", []fsm.NewJob{{ID: "build", Command: "x"}, {ID: "build", Command: "y"}}, "jobs[1].id", "build"},
		{"ExplicitIDInTheGeneratedRange", []fsm.NewJob{{ID: "job-6", Command: "x"}}, "jobs[0].id", "reserved"},
		{"IdempotencyKeyTwiceInOneBatch", []fsm.NewJob{{Command: "x", IdempotencyKey: "k"}, {Command: "y"}, {Command: "z", IdempotencyKey: "k"}}, "jobs[2].idempotency_key", `"k" is given twice`},
		{"OneBadJobRefusesTheBatch", []fsm.NewJob{job(), job("$0"), job("job-4"), job("nope")}, "depends_on", "unknown job nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := prepare(t)
			before := jobsJSON(t, h.f)
			changed := h.f.Changed()
			r := h.one(submit(c.jobs...))
			var ve *fsm.ValidationError
			if !errors.As(r.Err, &ve) {
				t.Fatalf("err = %v (%T), want *ValidationError", r.Err, r.Err)
			}
			if ve.Field != c.field || !strings.Contains(ve.Error(), c.reason) {
				t.Fatalf("err = field %q %q, want field %q mentioning %q", ve.Field, ve.Error(), c.field, c.reason)
			}
			if len(r.Jobs) != 0 {
				t.Errorf("rejected submit returned jobs %v", jobIDs(r.Jobs))
			}
			if h.f.Applied() != h.index {
				t.Errorf("applied = %d, want %d: a rejected command still applies its entry", h.f.Applied(), h.index)
			}
			if jobsJSON(t, h.f) != before {
				t.Fatal("a rejected submit changed the jobs")
			}
			if closed(changed) {
				t.Error("a rejected submit signalled Changed")
			}
			if id := h.submit(job())[0].ID; id != "job-5" {
				t.Fatalf("next id = %s, want job-5", id)
			}
		})
	}

	t.Run("BatchRefToAFailedKnownJob", func(t *testing.T) {
		// "$0" resolves through the idempotency key to a job that failed:
		// the same rule as naming it by id.
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a", IdempotencyKey: "a"})
		h.ok(fail(h.claimOne("w").ID, 0, "boom"))
		before := jobsJSON(t, h.f)
		r := h.one(submit(fsm.NewJob{IdempotencyKey: "a"}, fsm.NewJob{Command: "b", DependsOn: []string{"$0"}}))
		var ve *fsm.ValidationError
		if !errors.As(r.Err, &ve) || ve.Field != "depends_on" {
			t.Fatalf("err = %v, want a depends_on ValidationError", r.Err)
		}
		if jobsJSON(t, h.f) != before {
			t.Fatal("a rejected submit changed the jobs")
		}
	})
}
