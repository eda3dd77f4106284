package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestCheckProgress plants each fault checkProgress looks for in the reads
// of a bulk action of 10 jobs, and checks that a clean run passes.
func TestCheckProgress(t *testing.T) {
	read := func(node int, state string, matched, done, skipped, failed int64) bulkObs {
		return bulkObs{Node: node, Bulk: wire.Bulk{State: state, Matched: matched, Done: done, Skipped: skipped, Failed: failed}}
	}
	clean := []bulkObs{read(0, wire.BulkRunning, 0, 0, 0, 0), read(1, wire.BulkRunning, 4, 4, 0, 0), read(2, wire.BulkRunning, 4, 4, 0, 0),
		read(0, wire.BulkRunning, 8, 8, 0, 0), read(1, wire.BulkDone, 10, 10, 0, 0), read(2, wire.BulkDone, 10, 10, 0, 0)}
	if got := checkProgress(clean, 10); len(got) != 0 {
		t.Fatalf("clean reads: %v", got)
	}
	for _, tc := range []struct {
		name string
		obs  []bulkObs
		want string
	}{
		{"none", nil, "no read"},
		{"done went back", []bulkObs{clean[0], clean[1], read(2, wire.BulkRunning, 4, 2, 0, 0), clean[3], clean[4]}, "progress went back"},
		{"a stale node at the end", append(clean[:5:5], read(2, wire.BulkRunning, 8, 8, 0, 0)), "progress went back"},
		{"ran again", []bulkObs{clean[0], read(1, wire.BulkDone, 10, 10, 0, 0), read(2, wire.BulkRunning, 10, 10, 0, 0), read(0, wire.BulkDone, 10, 10, 0, 0)}, "was done at read 2 and running"},
		{"a job named twice", append(clean[:4:4], read(1, wire.BulkDone, 11, 10, 1, 0)), "11 matched, 10 done, 1 skipped"},
		{"a job retried twice", append(clean[:4:4], read(1, wire.BulkDone, 11, 11, 0, 0)), "11 matched, 11 done"},
		{"a job failed", append(clean[:4:4], read(1, wire.BulkDone, 10, 9, 0, 1)), "1 failed"},
		{"stopped", append(clean[:4:4], read(1, wire.BulkStopped, 8, 8, 0, 0)), "ended stopped"},
	} {
		got := strings.Join(checkProgress(tc.obs, 10), "; ")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: problems %q, want one saying %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckRetried plants each fault checkRetried looks for in the jobs of
// a queue after a bulk retry, and checks that a clean queue passes.
func TestCheckRetried(t *testing.T) {
	since := time.Unix(1000, 0)
	job := func(id string) wire.Job {
		return wire.Job{ID: id, Status: wire.StatusPending, RunAt: since.Add(time.Second), AttemptHistory: []wire.Attempt{{Attempt: 1, Status: wire.StatusFailed}}}
	}
	ids := []string{"a", "b", "c"}
	clean := []wire.Job{job("a"), job("b"), job("c")}
	if got := checkRetried(clean, ids, since); len(got) != 0 {
		t.Fatalf("clean queue: %v", got)
	}
	twice := job("b")
	twice.AttemptHistory = append(twice.AttemptHistory, wire.Attempt{Attempt: 1, Status: wire.StatusFailed})
	failed := job("b")
	failed.Status, failed.Attempts = wire.StatusFailed, 1
	old := job("b")
	old.RunAt = since.Add(-time.Second)
	for _, tc := range []struct {
		name string
		jobs []wire.Job
		want string
	}{
		{"missing", clean[:2], "1 of the 3 failed jobs are not in the queue"},
		{"listed twice", append(clean[:3:3], job("a")), "job a listed twice"},
		{"a stray", append(clean[:3:3], job("z")), "job z is in the queue but was not one of"},
		{"two attempts", []wire.Job{job("a"), twice, job("c")}, "job b has 2 attempts in its history"},
		{"not retried", []wire.Job{job("a"), failed, job("c")}, "job b is failed with 1 attempts"},
		{"retried before the action", []wire.Job{job("a"), old, job("c")}, "job b is pending with 0 attempts counted, run_at"},
	} {
		got := strings.Join(checkRetried(tc.jobs, ids, since), "; ")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: problems %q, want one saying %q", tc.name, got, tc.want)
		}
	}
}

// TestResumeAfter: the time from the kill to the first step applied after
// it comes from the first read after the kill whose updated_at is later.
func TestResumeAfter(t *testing.T) {
	kill := time.Unix(100, 0)
	at := func(read, updated float64) bulkObs {
		return bulkObs{At: kill.Add(time.Duration(read * float64(time.Second))), Bulk: wire.Bulk{UpdatedAt: kill.Add(time.Duration(updated * float64(time.Second)))}}
	}
	obs := []bulkObs{at(-0.1, -0.2), at(0.5, -0.05), at(1.2, 1.1), at(1.3, 1.25)}
	applied, seen := resumeAfter(obs, kill)
	if applied != 1100*time.Millisecond || seen != 1200*time.Millisecond {
		t.Errorf("resumeAfter = %s, %s; want 1.1s, 1.2s", applied, seen)
	}
	before, after := aroundKill(obs, kill)
	if before != obs[0] || after != obs[1] {
		t.Errorf("aroundKill = %v, %v; want the reads at -0.1 s and 0.5 s", before.At, after.At)
	}
	if a, s := resumeAfter(obs[:2], kill); a != 0 || s != 0 {
		t.Errorf("no step after the kill: resumeAfter = %s, %s, want 0, 0", a, s)
	}
}
