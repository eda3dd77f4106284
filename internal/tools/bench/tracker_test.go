package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

func TestPercentile(t *testing.T) {
	vals := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{{0.5, 5}, {0.99, 10}, {1, 10}, {0.1, 1}} {
		if got := percentile(vals, tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestTrackerCheck(t *testing.T) {
	now := time.Now()
	setup := func() *tracker {
		tr := newTracker()
		tr.submitted("a", now)
		tr.submitted("b", now)
		return tr
	}
	t.Run("EveryJobClaimedAndDoneOnceIsCorrect", func(t *testing.T) {
		tr := setup()
		tr.claimed("a", 1, 10, now)
		tr.claimed("b", 1, 11, now)
		tr.done("a", 10)
		tr.done("b", 11)
		if p := tr.check(true); len(p) != 0 {
			t.Errorf("check = %q, want no problems", p)
		}
	})
	t.Run("RetriedAttemptIsCorrect", func(t *testing.T) {
		tr := setup()
		tr.claimed("a", 1, 10, now)
		tr.claimed("a", 2, 12, now)
		tr.claimed("b", 1, 11, now)
		tr.done("a", 12)
		tr.done("b", 11)
		if p := tr.check(true); len(p) != 0 {
			t.Errorf("check = %q, want no problems", p)
		}
	})
	for _, tc := range []struct {
		name string
		do   func(tr *tracker)
		want string
	}{
		{"AttemptClaimedTwiceIsReported", func(tr *tracker) {
			tr.claimed("a", 1, 10, now)
			tr.claimed("a", 1, 13, now)
		}, "claimed twice"},
		{"LeaseReusedIsReported", func(tr *tracker) {
			tr.claimed("a", 1, 10, now)
			tr.claimed("a", 2, 10, now)
		}, "claimed twice"},
		{"JobDoneTwiceIsReported", func(tr *tracker) { tr.done("a", 10); tr.done("a", 10) }, "done 2 times"},
		{"JobNeverDoneIsReported", func(tr *tracker) {}, "done 0 times"},
		{"StrayJobIsReported", func(tr *tracker) { tr.claimed("zzz", 1, 99, now) }, "never submitted"},
		{"DuplicateIDIsReported", func(tr *tracker) { tr.submitted("a", now) }, "two submits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := setup()
			tc.do(tr)
			p := strings.Join(tr.check(true), "; ")
			if !strings.Contains(p, tc.want) {
				t.Errorf("check = %q, want a problem containing %q", p, tc.want)
			}
		})
	}
	t.Run("ClaimFromUnservedQueueIsReported", func(t *testing.T) {
		tr := setup()
		tr.claimed("a", 1, 10, now)
		if p := strings.Join(tr.check(false), "; "); !strings.Contains(p, "nobody serves") {
			t.Errorf("check = %q, want the claim reported", p)
		}
	})
}

// An attempt the cluster gave back because its claim reply was lost is in
// the job's history with the number of the attempt that ran after it; it
// is not a second claim of that attempt.
func TestTrackFromHistorySkipsReturnedAttempts(t *testing.T) {
	now := time.Now()
	job := wire.Job{ID: "a", Queue: "q", Status: wire.StatusDone, Attempts: 1, AttemptHistory: []wire.Attempt{
		{Attempt: 1, Lease: 10, Status: attemptReturned, Started: now, Ended: now},
		{Attempt: 1, Lease: 12, Status: wire.StatusDone, Started: now, Ended: now},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(wire.JobList{Jobs: []wire.Job{job}})
	}))
	defer srv.Close()
	b := newBencher(Config{Clients: 1, Stderr: io.Discard})
	defer b.hc.CloseIdleConnections()
	tr := newTracker()
	tr.submitted("a", now)
	if p := b.trackFromHistory(t.Context(), srv.URL, "q", tr); len(p) != 0 {
		t.Fatalf("trackFromHistory = %q, want no problems", p)
	}
	if p := tr.check(true); len(p) != 0 {
		t.Errorf("check = %q, want no problems", p)
	}
}
