package jobcheck

import (
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
)

func job(id, status string, attempts ...wire.Attempt) wire.Job {
	return wire.Job{ID: id, IdempotencyKey: "k-" + id, Status: status, Attempts: len(attempts), AttemptHistory: attempts}
}

func att(n int, lease uint64, status string) wire.Attempt {
	return wire.Attempt{Attempt: n, Lease: lease, Status: status}
}

func TestFinishedOnce(t *testing.T) {
	expired := att(2, 12, wire.StatusDone)
	expired.Expired = true
	for _, tc := range []struct {
		name string
		j    wire.Job
		want string // "" for no problem
	}{
		{"DoneOnce", job("a", wire.StatusDone, att(1, 10, wire.StatusDone)), ""},
		{"RetriedThenDone", job("a", wire.StatusDone, att(1, 10, wire.StatusFailed), att(2, 12, wire.StatusDone)), ""},
		{"DoneTwice", job("a", wire.StatusDone, att(1, 10, wire.StatusDone), att(2, 12, wire.StatusDone)), "2 attempts done"},
		{"DoneThenMore", job("a", wire.StatusDone, att(1, 10, wire.StatusDone), att(2, 12, wire.StatusFailed)), "more attempts follow"},
		{"LeaseGoesBack", job("a", wire.StatusDone, att(1, 12, wire.StatusFailed), att(2, 10, wire.StatusDone)), "after lease 12"},
		{"ExpiredDoneDoesNotCount", job("a", wire.StatusDone, att(1, 10, wire.StatusFailed), expired), "with 0 attempts done"},
		{"NotDone", job("a", wire.StatusPending), "want done"},
		{"DoneWithoutAttempt", job("a", wire.StatusDone), "with 0 attempts done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(FinishedOnce(tc.j), "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("FinishedOnce = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAccepted(t *testing.T) {
	a, b := job("a", wire.StatusDone), job("b", wire.StatusDone)
	for _, tc := range []struct {
		name     string
		accepted map[string]string
		jobs     []wire.Job
		want     string
	}{
		{"EveryAcceptedJobListed", map[string]string{"k-a": "a", "k-b": "b"}, []wire.Job{a, b}, ""},
		{"LostJob", map[string]string{"k-a": "a", "k-b": "b"}, []wire.Job{a}, "lost job"},
		{"OtherJobUnderTheKey", map[string]string{"k-a": "x"}, []wire.Job{a}, "the job with that key is a"},
		{"TwoSubmitsOneJob", map[string]string{"k-a": "a", "k-b": "a"}, []wire.Job{a, b}, "both answered with job a"},
		{"TwoJobsOneKey", map[string]string{"k-a": "a"}, []wire.Job{a, {ID: "c", IdempotencyKey: "k-a"}}, "two jobs with idempotency key k-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := Accepted(tc.accepted, tc.jobs)
			got := strings.Join(p, "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Accepted = %q, want %q", got, tc.want)
			}
		})
	}
}
