// Package jobcheck is the one check that every accepted job finished once,
// shared by the end-to-end tests, the bench and the chaos harness, and the
// check that a queue's leases never exceeded its limits (limits.go). It reads
// the jobs a cluster lists (wire.Job) and what the clients were told, and
// returns the problems it finds as sentences; it never talks to a cluster.
package jobcheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/workron/workron/api/wire"
)

// DoneAttempts is how many of j's attempts ended done by their worker's
// report (an attempt the cluster ended, Expired, does not count).
func DoneAttempts(j wire.Job) int {
	n := 0
	for _, a := range j.AttemptHistory {
		if a.Status == wire.StatusDone && !a.Expired {
			n++
		}
	}
	return n
}

// Attempts lists what is wrong with one job's attempts: a lease that does
// not grow (leases are Raft indexes), more than one attempt done, a done
// attempt followed by more, or a status that disagrees with them (a job is
// done exactly when one attempt is).
func Attempts(j wire.Job) []string {
	var out []string
	var prev uint64
	for i, a := range j.AttemptHistory {
		if a.Lease <= prev {
			out = append(out, fmt.Sprintf("job %s: attempt %d has lease %d after lease %d: %s", j.ID, i+1, a.Lease, prev, History(j)))
		}
		prev = a.Lease
		if a.Status == wire.StatusDone && !a.Expired && i != len(j.AttemptHistory)-1 {
			out = append(out, fmt.Sprintf("job %s: attempt %d is done but more attempts follow: %s", j.ID, i+1, History(j)))
		}
	}
	done := DoneAttempts(j)
	if done > 1 {
		out = append(out, fmt.Sprintf("job %s: %d attempts done, want at most 1: %s", j.ID, done, History(j)))
	}
	if (j.Status == wire.StatusDone) != (done == 1) {
		out = append(out, fmt.Sprintf("job %s is %s with %d attempts done: %s", j.ID, j.Status, done, History(j)))
	}
	return out
}

// FinishedOnce lists what is wrong with a job that should have run to the
// end and succeeded: not done, or done other than by exactly one attempt
// (see Attempts).
func FinishedOnce(j wire.Job) []string {
	out := Attempts(j)
	if j.Status != wire.StatusDone {
		out = append(out, fmt.Sprintf("job %s is %s, want done: %s", j.ID, j.Status, History(j)))
	}
	return out
}

// Accepted checks the listed jobs against the submits the cluster
// accepted. accepted maps each accepted submit's idempotency key to the job
// id its reply named. It reports two submits answered with one job, an
// accepted job that is not listed (lost), and a listed job whose key names
// another job than its submit's reply; and returns the listed jobs by key.
// Jobs without a key are left out.
func Accepted(accepted map[string]string, jobs []wire.Job) (map[string]wire.Job, []string) {
	var out []string
	byKey := make(map[string]wire.Job, len(jobs))
	for _, j := range jobs {
		if j.IdempotencyKey == "" {
			continue
		}
		if other, dup := byKey[j.IdempotencyKey]; dup {
			out = append(out, fmt.Sprintf("two jobs with idempotency key %s: %s and %s", j.IdempotencyKey, other.ID, j.ID))
		}
		byKey[j.IdempotencyKey] = j
	}
	keyOf := make(map[string]string, len(accepted))
	for _, key := range sortedKeys(accepted) {
		id := accepted[key]
		if other, dup := keyOf[id]; dup {
			out = append(out, fmt.Sprintf("the submits of %s and %s were both answered with job %s", other, key, id))
		}
		keyOf[id] = key
		j, ok := byKey[key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("lost job: the submit of %s was answered with %s, which does not exist", key, id))
		case j.ID != id:
			out = append(out, fmt.Sprintf("the submit of %s was answered with %s, but the job with that key is %s", key, id, j.ID))
		}
	}
	return byKey, out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// History is a one-line account of a job's attempts, for a problem report.
func History(j wire.Job) string {
	var parts []string
	for _, a := range j.AttemptHistory {
		p := fmt.Sprintf("#%d lease %d on %s %s-%s: %s", a.Attempt, a.Lease, a.WorkerID,
			a.Started.Format("15:04:05.000"), a.Ended.Format("15:04:05.000"), a.Status)
		if a.Expired {
			p += " (expired)"
		}
		if a.Error != "" {
			p += " (" + a.Error + ")"
		}
		parts = append(parts, p)
	}
	if j.Status == wire.StatusRunning {
		parts = append(parts, fmt.Sprintf("#%d lease %d on %s: running", j.Attempts, j.Lease, j.WorkerID))
	}
	return strings.Join(parts, "; ")
}
