package fsm_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestFlowProperty drives random interleavings of submits, claims,
// reports, expiries, cancels, retries and leader changes (a snapshot
// restored into a fresh FSM, which then carries on) through queues with
// limits, and checks after every entry that:
//
//   - no queue runs more attempts than its concurrency, no key more than
//     its key concurrency;
//   - no bucket has handed out more than burst + rate × elapsed tokens
//     since its first;
//   - a claim that took fewer jobs than it asked for left no due pending
//     job that no limit holds back (the picker loses no job);
//   - no participant of a queue's rotation (a key, or the jobs without
//     one) starves: while it has a due job that nothing holds back, the
//     queue's claims take at most the sum of the other participants'
//     weights (of those with such jobs meanwhile) before one of its own.
//
// Reports may also say rate-limited (pausing the key or queue) or snooze.
func TestFlowProperty(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("Seed", seed), func(t *testing.T) { flowRun(t, uint64(seed)) })
	}
}

var flowLimits = map[string]store.QueueLimits{
	"q1": {Concurrency: 4, KeyConcurrency: 2},
	"q2": {KeyConcurrency: 1, Rate: store.Rate{Count: 5, Per: int64(time.Second)}, Burst: 3, KeyRate: store.Rate{Count: 1, Per: int64(time.Second)}, KeyBurst: 2},
	"q3": {Concurrency: 3, Rate: store.Rate{Count: 2, Per: int64(time.Second)}},
	"q4": {KeyWeights: map[string]int{"a": 3, "c": 2}},
}

// flowTaken counts the tokens a bucket handed out since its first.
type flowTaken struct {
	first int64
	n     int64
}

func flowRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	h := setup(t)
	queues := []string{"q1", "q2", "q3", "q4"}
	for _, q := range queues {
		h.ok(setLimits(q, flowLimits[q]))
	}
	starve := newFlowStarve()
	keys := []string{"", "a", "b", "c", "d"}
	taken := map[string]*flowTaken{} // "q" or "q/key"
	elapsed := time.Duration(0)
	for step := range 300 {
		elapsed += time.Duration(rng.IntN(300)) * time.Millisecond
		h.at(elapsed)
		switch op := rng.IntN(100); {
		case op < 30:
			n := 1 + rng.IntN(4)
			jobs := make([]fsm.NewJob, n)
			for i := range jobs {
				jobs[i] = fsm.NewJob{Command: "x", Queue: queues[rng.IntN(len(queues))], ConcurrencyKey: keys[rng.IntN(len(keys))],
					Priority: rng.IntN(3), MaxAttempts: 2, Backoff: store.Backoff{Base: int64(100 * time.Millisecond)}}
				if rng.IntN(5) == 0 {
					jobs[i].RunAt = ns(h.now) + int64(rng.IntN(2000))*int64(time.Millisecond)
				}
			}
			h.ok(submit(jobs...))
		case op < 60:
			max := 1 + rng.IntN(8)
			before := flowRunnable(t, h)
			got := h.claim(fsm.Claim{WorkerID: fmt.Sprint("w", rng.IntN(3)), Queues: queues, Max: max, Fair: true})
			for _, j := range got {
				flowTake(taken, j, ns(h.now))
			}
			starve.claimed(t, step, before, flowRunnable(t, h), got)
			if len(got) < max {
				flowNothingLeft(t, h, step)
			}
		case op < 75:
			if j := flowPick(t, h, rng, func(j *store.Job) bool { return j.Status == store.StatusRunning }); j != nil {
				r := fsm.Report{JobID: j.ID, Lease: j.Lease, Success: rng.IntN(2) == 0, ExitCode: intp(rng.IntN(2))}
				switch rng.IntN(6) {
				case 0:
					r.Success, r.RateLimitedFor = false, int64(1+rng.IntN(2000))*int64(time.Millisecond)
				case 1:
					r.Success, r.SnoozeFor = false, int64(1+rng.IntN(2000))*int64(time.Millisecond)
				}
				h.ok(report(r))
			}
		case op < 82:
			if j := flowPick(t, h, rng, func(j *store.Job) bool { return j.Status.Leased() }); j != nil {
				elapsed = max(elapsed, time.Duration(j.LeaseDeadline-ns(t0)))
				h.at(elapsed)
				h.ok(expire(j.ID, j.Lease))
			}
		case op < 88:
			if j := flowPick(t, h, rng, func(j *store.Job) bool { return !j.Status.Finished() }); j != nil {
				h.one(cancel(j.ID, false))
			}
		case op < 94:
			if j := flowPick(t, h, rng, func(j *store.Job) bool {
				return j.Status == store.StatusFailed || j.Status == store.StatusCancelled
			}); j != nil {
				h.ok(retry(j.ID))
			}
		default:
			h.f = snapshotRestore(t, h.f) // a leader change: a new node carries on
		}
		flowCheck(t, h, taken, step)
		if step%25 == 24 {
			checkRebuilt(t, h.f)
		}
		if t.Failed() {
			return
		}
	}
	checkIndexes(t, h.f)
	checkRebuilt(t, h.f)
}

// checkRebuilt checks that the in-memory indexes a start rebuilds (from
// the search index's counts and the live jobs) are those rebuilt from
// every job's head, and that their counts, leases and running attempts are
// those kept by applying (the rest may differ as it always did: a rebuild
// restarts the held clocks, and files a delayed job that is now due as
// ready at once, where applying moves it at the next claim).
func checkRebuilt(t *testing.T, f *fsm.FSM) {
	t.Helper()
	fromIndex, fromScan, _, err := fsm.RebuiltIndexes(f, true)
	if err != nil {
		t.Fatal(err)
	}
	if fromIndex != fromScan {
		t.Fatalf("indexes rebuilt from the search index:\n%s\nfrom every job:\n%s", fromIndex, fromScan)
	}
	fromIndex, _, applied, err := fsm.RebuiltIndexes(f, false)
	if err != nil {
		t.Fatal(err)
	}
	kept := func(dump string) []string {
		var out []string
		for _, l := range strings.Split(dump, "\n") {
			for _, p := range []string{"counts ", "leases ", "leaseOf ", "byWorker ", "running ", "keyRun ", "keyFull "} {
				if strings.HasPrefix(l, p) {
					out = append(out, l)
				}
			}
		}
		return out
	}
	if got, want := kept(fromIndex), kept(applied); !slices.Equal(got, want) {
		t.Fatalf("indexes rebuilt:\n%s\nkept by applying:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func flowTake(taken map[string]*flowTaken, j *store.Job, now int64) {
	l := flowLimits[j.Queue]
	add := func(name string) {
		if taken[name] == nil {
			taken[name] = &flowTaken{first: now}
		}
		taken[name].n++
	}
	if !l.Rate.IsZero() {
		add(j.Queue)
	}
	if !l.KeyRate.IsZero() && j.ConcurrencyKey != "" {
		add(j.Queue + "/" + j.ConcurrencyKey)
	}
}

func flowPick(t *testing.T, h *harness, rng *rand.Rand, ok func(*store.Job) bool) *store.Job {
	var cands []*store.Job
	for _, j := range allJobs(t, h.f) {
		if ok(j) {
			cands = append(cands, j)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[rng.IntN(len(cands))]
}

func flowCheck(t *testing.T, h *harness, taken map[string]*flowTaken, step int) {
	t.Helper()
	run := map[string]int{}
	keyRun := map[string]int{}
	for _, j := range allJobs(t, h.f) {
		if j.Status.Leased() {
			run[j.Queue]++
			if j.ConcurrencyKey != "" {
				keyRun[j.Queue+"/"+j.ConcurrencyKey]++
			}
		}
	}
	for q, l := range flowLimits {
		if l.Concurrency > 0 && run[q] > l.Concurrency {
			t.Errorf("step %d: queue %s runs %d, over its %d", step, q, run[q], l.Concurrency)
		}
		if got := h.f.QueueLimits(q).Running; got != run[q] {
			t.Errorf("step %d: queue %s: index says %d running, store %d", step, q, got, run[q])
		}
	}
	for k, n := range keyRun {
		var q string
		fmt.Sscanf(k, "%2s", &q)
		if l := flowLimits[q]; l.KeyConcurrency > 0 && n > l.KeyConcurrency {
			t.Errorf("step %d: key %s runs %d, over its %d", step, k, n, l.KeyConcurrency)
		}
	}
	now := ns(h.now)
	for name, tk := range taken {
		l := flowLimits[name[:2]]
		r, burst := l.Rate, l.Burst
		if len(name) > 2 {
			r, burst = l.KeyRate, l.KeyBurst
		}
		if burst == 0 {
			burst = int(r.Count)
		}
		if bound := int64(burst) + r.Count*(now-tk.first)/r.Per; tk.n > bound {
			t.Errorf("step %d: bucket %s handed out %d tokens, over burst + rate × elapsed = %d", step, name, tk.n, bound)
		}
	}
}

// flowNothingLeft checks, after a claim that took less than it asked, that
// every due pending job is held back by a limit.
func flowNothingLeft(t *testing.T, h *harness, step int) {
	t.Helper()
	now := ns(h.now)
	for _, j := range allJobs(t, h.f) {
		if j.Status == store.StatusPending && j.RunAt <= now && h.f.HeldBy(j, now) == "" {
			t.Errorf("step %d: job %s (queue %s, key %q) is due and held by no limit, but the claim left it; flow %+v", step, j.ID, j.Queue, j.ConcurrencyKey, h.f.QueueLimits(j.Queue))
		}
	}
}

// flowRunnable lists, by queue, the participants of its rotation (keys,
// "" for the jobs without one) that have a due pending job nothing holds
// back.
func flowRunnable(t *testing.T, h *harness) map[string]map[string]bool {
	now := ns(h.now)
	out := map[string]map[string]bool{}
	for _, j := range allJobs(t, h.f) {
		if j.Status == store.StatusPending && j.RunAt <= now && h.f.HeldBy(j, now) == "" {
			if out[j.Queue] == nil {
				out[j.Queue] = map[string]bool{}
			}
			out[j.Queue][j.ConcurrencyKey] = true
		}
	}
	return out
}

// flowStarve follows each waiting participant of each queue: the claims of
// its queue that went to others since it last got one (or began to wait),
// and the participants that had runnable jobs meanwhile.
type flowStarve struct {
	skipped map[string]int             // "queue/key" -> claims to others
	window  map[string]map[string]bool // "queue/key" -> participants seen
}

func newFlowStarve() *flowStarve {
	return &flowStarve{skipped: map[string]int{}, window: map[string]map[string]bool{}}
}

// claimed accounts for one claim: before and after are the runnable
// participants around it (one runnable at both was runnable all through
// the claim: a claim only closes keys), got the jobs it took, in order.
func (s *flowStarve) claimed(t *testing.T, step int, before, after map[string]map[string]bool, got []*store.Job) {
	t.Helper()
	for q, ps := range before {
		var keys []string
		for _, j := range got {
			if j.Queue == q {
				keys = append(keys, j.ConcurrencyKey)
			}
		}
		for p := range ps {
			name := q + "/" + p
			if !after[q][p] {
				delete(s.skipped, name)
				delete(s.window, name)
				continue
			}
			others := 0
			for _, k := range keys {
				if k == p {
					others = 0
					s.skipped[name] = 0
					s.window[name] = map[string]bool{}
					continue
				}
				others++
			}
			if s.window[name] == nil {
				s.window[name] = map[string]bool{}
			}
			for o := range ps {
				s.window[name][o] = true
			}
			s.skipped[name] += others
			bound := 0
			for o := range s.window[name] {
				if o != p {
					bound += flowWeight(q, o)
				}
			}
			if s.skipped[name] > bound {
				t.Errorf("step %d: %s waited %d claims of its queue, over the bound %d (participants %v)", step, name, s.skipped[name], bound, s.window[name])
			}
		}
	}
	for name := range s.skipped {
		q, p, _ := strings.Cut(name, "/")
		if !before[q][p] {
			delete(s.skipped, name)
			delete(s.window, name)
		}
	}
}

func flowWeight(q, key string) int {
	if w := flowLimits[q].KeyWeights[key]; w > 0 && key != "" {
		return w
	}
	return 1
}
