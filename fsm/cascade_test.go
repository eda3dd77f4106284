//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// graph builds n jobs (job-1 to job-n, in submits of up to 500): job i
// depends on the jobs deps(i) names, each lower than i.
func graph(h *harness, n int, deps func(i int) []int) {
	h.t.Helper()
	buildGraph(func(c fsm.Cmd) { h.ok(c) }, n, deps)
}

func buildGraph(apply func(fsm.Cmd), n int, deps func(i int) []int) {
	for b := 1; b <= n; b += 500 {
		var jobs []fsm.NewJob
		for i := b; i < b+500 && i <= n; i++ {
			var on []string
			for _, d := range deps(i) {
				if d >= b {
					on = append(on, fmt.Sprintf("$%d", d-b))
				} else {
					on = append(on, fmt.Sprintf("job-%d", d))
				}
			}
			jobs = append(jobs, fsm.NewJob{Command: "true", DependsOn: on})
		}
		apply(submit(jobs...))
	}
}

func chainDeps(i int) []int {
	if i == 1 {
		return nil
	}
	return []int{i - 1}
}

func fanDeps(i int) []int {
	if i == 1 {
		return nil
	}
	return []int{1}
}

// dagDeps is a graph of two parts: job-1 to job-500 hang from job-1,
// job-501 to job-n from job-501 and one in nine also from a job of the
// first part; many jobs have two dependencies, reached twice.
func dagDeps(i int) []int {
	switch {
	case i == 1 || i == 501:
		return nil
	case i <= 500:
		return []int{i / 2, max(1, i-7)}
	case i%9 == 0:
		return []int{501 + (i-501)/3, i % 500}
	}
	return []int{501 + (i-501)/2}
}

// cancelChunked is a cancel whose cascade goes in chunks.
func cancelChunked(id string) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpCancelChunked, Cancel: &fsm.Cancel{JobID: id, Cascade: true}}
}

func continueCascade(id uint64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpContinueCascade, ContinueCascade: &fsm.ContinueCascade{ID: id}}
}

// finishCascades applies continue_cascade, one an entry a second apart,
// until no cascade is under way, and returns how many it took.
func finishCascades(h *harness) int {
	h.t.Helper()
	n := 0
	for cs := h.f.Cascades(1); len(cs) > 0; cs = h.f.Cascades(1) {
		if n++; n > 10_000 {
			h.t.Fatal("cascade does not end")
		}
		h.now = h.now.Add(time.Second)
		h.ok(continueCascade(cs[0].ID))
	}
	return n
}

// statuses counts the jobs job-1 to job-n by status.
func statuses(h *harness, n int) map[store.Status]int {
	h.t.Helper()
	out := make(map[store.Status]int)
	for _, j := range jobsUpTo(h, n) {
		out[j.Status]++
	}
	return out
}

func jobsUpTo(h *harness, n int) []*store.Job {
	h.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%d", i+1)
	}
	jobs, err := h.f.Jobs(ids)
	if err != nil || len(jobs) != n {
		h.t.Fatalf("jobs: %d of %d, %v", len(jobs), n, err)
	}
	return jobs
}

// jobsState is the jobs' stored form without the Raft index of their last
// change, which a cascade in chunks changes later by design.
func jobsState(h *harness, n int) string {
	h.t.Helper()
	jobs := jobsUpTo(h, n)
	for _, j := range jobs {
		j.ModifyIndex = 0
	}
	b, err := json.Marshal(jobs)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func TestCascadeChunked(t *testing.T) {
	const n = 5000
	for _, shape := range []struct {
		name string
		deps func(int) []int
	}{{"Chain", chainDeps}, {"Fan", fanDeps}} {
		t.Run("CancelOfTheRootOfA"+shape.name+"ChangesAChunkThenContinues", func(t *testing.T) {
			h := setup(t)
			graph(h, n, shape.deps)
			res := h.ok(cancelChunked("job-1"))
			if got := res.Jobs[0]; got.ID != "job-1" || got.Status != store.StatusCancelled {
				t.Fatalf("cancel answered %s %s, want job-1 cancelled", got.ID, got.Status)
			}
			got := statuses(h, n)
			if c := got[store.StatusCancelled]; c < 2 || c > 1+fsm.CascadeChunk {
				t.Fatalf("first entry cancelled %d jobs, want the root and 1 to %d dependents", c, fsm.CascadeChunk)
			}
			if got[store.StatusBlocked] != n-got[store.StatusCancelled] {
				t.Fatalf("statuses %v: the jobs not reached should be blocked", got)
			}
			if jobs := h.claim(fsm.Claim{WorkerID: "w", Max: 100}); len(jobs) != 0 {
				t.Fatalf("claimed %s while the cascade is under way", jobIDs(jobs))
			}
			if cs := h.f.Cascades(10); len(cs) != 1 || cs[0].Root != "job-1" {
				t.Fatalf("cascades under way %+v, want one from job-1", cs)
			}
			steps := finishCascades(h)
			if max := n/fsm.CascadeChunk + 2; steps > max {
				t.Errorf("%d continuations, want at most %d", steps, max)
			}
			if got := statuses(h, n); got[store.StatusCancelled] != n {
				t.Fatalf("after the cascade: %v, want all %d cancelled", got, n)
			}
			if got := h.job(fmt.Sprintf("job-%d", n)).LastError; got != fmt.Sprintf("dependency job-%d cancelled", shape.deps(n)[0]) {
				t.Errorf("last job's error %q", got)
			}
			checkIndexes(t, h.f)
		})
	}

	t.Run("EveryEntryVisitsAtMostAChunkWhateverItCarries", func(t *testing.T) {
		h := setup(t)
		graph(h, 3000, func(i int) []int {
			if i <= 2 {
				return nil
			}
			return []int{1 + i%2}
		})
		h.do(cancelChunked("job-1"), cancelChunked("job-2"))
		if c := statuses(h, 3000)[store.StatusCancelled]; c > 2+fsm.CascadeChunk {
			t.Fatalf("one entry of two cancels cancelled %d jobs, want at most %d", c, 2+fsm.CascadeChunk)
		}
		finishCascades(h)
		if c := statuses(h, 3000)[store.StatusCancelled]; c != 3000 {
			t.Fatalf("%d cancelled after the cascades, want 3000", c)
		}
	})

	t.Run("ContinuingACascadeThatIsDoneChangesNothing", func(t *testing.T) {
		h := setup(t)
		graph(h, 10, chainDeps)
		h.ok(cancelChunked("job-1"))
		if cs := h.f.Cascades(1); len(cs) != 0 {
			t.Fatalf("a cascade of 9 jobs is still under way: %+v", cs)
		}
		before := jobsJSON(t, h.f)
		h.ok(continueCascade(1))
		h.ok(continueCascade(99))
		if jobsJSON(t, h.f) != before {
			t.Fatal("continue_cascade of a finished cascade changed jobs")
		}
	})

	t.Run("ACascadeUnderWaySurvivesASnapshot", func(t *testing.T) {
		h := setup(t)
		graph(h, 2500, chainDeps)
		h.ok(cancelChunked("job-1"))
		h.f = snapshotRestore(t, h.f)
		if cs := h.f.Cascades(1); len(cs) != 1 {
			t.Fatalf("restored cascades %+v, want the one under way", cs)
		}
		finishCascades(h)
		if c := statuses(h, 2500)[store.StatusCancelled]; c != 2500 {
			t.Fatalf("%d cancelled after the restored cascade, want 2500", c)
		}
	})

	t.Run("ARootRetriedMeanwhileKeepsTheDependentsNotYetReached", func(t *testing.T) {
		h := setup(t)
		graph(h, 3000, fanDeps)
		h.ok(cancelChunked("job-1"))
		reached := statuses(h, 3000)[store.StatusCancelled] - 1 // the root's dependents
		h.ok(retry("job-1"))
		finishCascades(h)
		got := statuses(h, 3000)
		if got[store.StatusCancelled] != reached || got[store.StatusBlocked] != 2999-reached {
			t.Fatalf("statuses %v, want the %d reached cancelled and the rest blocked", got, reached)
		}
		h.ok(succeed(h.claimOne("w").ID, 0))
		if got := statuses(h, 3000)[store.StatusPending]; got != 2999-reached {
			t.Fatalf("%d pending after the root succeeded, want %d", got, 2999-reached)
		}
	})

	t.Run("ARootRevivedMeanwhileEndsWithEveryDependentBack", func(t *testing.T) {
		h := setup(t)
		graph(h, 3000, chainDeps)
		h.ok(cancelChunked("job-1"))
		h.ok(fsm.Cmd{Op: fsm.OpRetryDependentsChunked, Retry: &fsm.Retry{JobID: "job-1", Dependents: true}})
		finishCascades(h)
		got := statuses(h, 3000)
		if got[store.StatusPending] != 1 || got[store.StatusBlocked] != 2999 {
			t.Fatalf("statuses %v, want job-1 pending and the rest blocked", got)
		}
	})

	t.Run("AProtocol3CancelStillCascadesInOneEntry", func(t *testing.T) {
		h := setup(t)
		graph(h, 2500, chainDeps)
		h.ok(cancel("job-1", true))
		if c := statuses(h, 2500)[store.StatusCancelled]; c != 2500 || len(h.f.Cascades(1)) != 0 {
			t.Fatalf("%d cancelled, cascades %v: want all at once", c, h.f.Cascades(1))
		}
	})
}

// TestCascadeChunkedEqualsOneShot is the property that a cascade in
// chunks, with nothing else in between, leaves the jobs exactly as the
// protocol-3 command does in one entry: for a cancel, a failure, and the
// revive of a retry.
func TestCascadeChunkedEqualsOneShot(t *testing.T) {
	const n = 3000
	for _, tc := range []struct {
		name           string
		oneShot, chunk func(h *harness)
	}{
		{"Cancel",
			func(h *harness) { h.ok(cancel("job-1", true)) },
			func(h *harness) { h.ok(cancelChunked("job-1")) }},
		{"Failure",
			func(h *harness) { h.ok(report(fsm.Report{JobID: "job-1", Error: "boom", Final: true})) },
			func(h *harness) { h.ok(report(fsm.Report{JobID: "job-1", Error: "boom", Final: true, Chunked: true})) }},
		{"Revive",
			func(h *harness) { h.ok(retryDeps("job-1")) },
			func(h *harness) {
				h.ok(fsm.Cmd{Op: fsm.OpRetryDependentsChunked, Retry: &fsm.Retry{JobID: "job-1", Dependents: true}})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, chunked := setup(t), setup(t)
			for _, h := range []*harness{one, chunked} {
				graph(h, n, dagDeps)
				switch tc.name {
				case "Failure":
					h.claimOne("w")
				case "Revive":
					h.ok(cancel("job-1", true))
				}
				h.at(time.Hour)
			}
			tc.oneShot(one)
			tc.chunk(chunked)
			if len(chunked.f.Cascades(1)) == 0 {
				t.Fatal("the chunked cascade ended in its first entry: the graph is too small to test chunks")
			}
			finishCascades(chunked)
			if a, b := jobsState(one, n), jobsState(chunked, n); a != b {
				t.Fatalf("chunked cascade differs from the one-shot:\none-shot %.600s\nchunked  %.600s", a, b)
			}
			checkIndexes(t, chunked.f)
		})
	}
}

// BenchmarkCascade measures the apply of one entry that cancels the root
// of a chain of 20,000 jobs: in one entry (protocol 3), and in chunks (the
// first chunk's entry; the rest follow in continue_cascade entries, each
// about as long). It reports ms/apply; it asserts no speed.
func BenchmarkCascade(b *testing.B) {
	const n = 20_000
	for _, tc := range []struct {
		name string
		cmd  fsm.Cmd
	}{{"OneShot", cancel("job-1", true)}, {"FirstChunk", cancelChunked("job-1")}} {
		b.Run(tc.name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				f, index := newBenchFSM(b), uint64(0)
				apply := func(c fsm.Cmd) {
					index++
					data, err := fsm.Encode(&fsm.Entry{Now: t0.UnixNano(), Cmds: []fsm.Cmd{c}})
					if err != nil {
						b.Fatal(err)
					}
					res := f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: data}})[0].([]fsm.Result)
					if res[0].Err != nil {
						b.Fatal(res[0].Err)
					}
				}
				buildGraph(apply, n, chainDeps)
				b.StartTimer()
				start := time.Now()
				apply(tc.cmd)
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/apply")
		})
	}
}

// TestCascadeEntriesDecode checks the entries a protocol-3 binary must
// refuse (cascade_entries_test.go) are what this one writes: each decodes
// to a command of ProtocolCascade and encodes back to the same bytes.
func TestCascadeEntriesDecode(t *testing.T) {
	for _, data := range cascadeEntries {
		e, err := fsm.Decode(data)
		if err != nil {
			t.Fatalf("Decode of %q: %v", data, err)
		}
		if p := e.Protocol(); p != fsm.ProtocolCascade {
			t.Errorf("%q needs protocol %d, want %d", data, p, fsm.ProtocolCascade)
		}
		if back, err := fsm.Encode(e); err != nil || string(back) != string(data) {
			t.Errorf("%q encodes back as %q (%v)", data, back, err)
		}
	}
}
