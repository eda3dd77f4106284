package jobcheck

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

func TestLimits(t *testing.T) {
	l := func(job, key string, lease uint64, start, end int64) Lease {
		return Lease{Job: job, Key: key, Lease: lease, Start: start, End: end}
	}
	for _, tc := range []struct {
		name      string
		leases    []Lease
		conc, key int
		peaks     LimitPeaks
		want      []string // substrings of the problems, in order; none: no problem
	}{
		{"WithinBothLimits", []Lease{
			l("a", "acme", 10, 0, 50), l("b", "acme", 11, 10, 60), l("c", "zeta", 12, 20, 30), l("d", "acme", 13, 50, 90), l("e", "zeta", 14, 40, 70),
		}, 3, 2, LimitPeaks{Queue: 3, Key: 2}, nil},
		{"AnEndAndAStartAtTheSameTimeDoNotOverlap", []Lease{
			l("a", "acme", 10, 0, 50), l("b", "acme", 11, 50, 60),
		}, 1, 1, LimitPeaks{Queue: 1, Key: 1}, nil},
		{"ALeaseThatEndsWhenItStartsIsNotHeldAfterwards", []Lease{
			l("a", "acme", 10, 20, 20), l("b", "acme", 11, 30, 60), l("c", "zeta", 12, 40, 70),
		}, 2, 1, LimitPeaks{Queue: 2, Key: 1}, nil},
		{"ALeaseThatEndsWhenItStartsTiesWithWhatStartsOrEndsThen", []Lease{
			l("a", "acme", 10, 0, 20), l("b", "acme", 11, 20, 20), l("c", "acme", 12, 20, 50),
		}, 1, 1, LimitPeaks{Queue: 1, Key: 1}, nil},
		{"ALeaseThatEndsWhenItStartsCountsBesideThoseHeldAcrossIt", []Lease{
			l("a", "acme", 10, 0, 50), l("b", "zeta", 11, 10, 60), l("c", "acme", 12, 30, 30),
		}, 2, 1, LimitPeaks{Queue: 3, Key: 2}, []string{
			"3 leases held at once, over the queue's limit 2, when lease 12 of job c was granted",
			`2 leases of key acme held at once, over its limit 1, when lease 12 of job c was granted: a/10 key "acme"`,
		}},
		{"QueueOverItsLimit", []Lease{
			l("a", "acme", 10, 0, 50), l("b", "beta", 11, 10, 60), l("c", "zeta", 12, 20, 30),
		}, 2, 0, LimitPeaks{Queue: 3, Key: 1}, []string{"3 leases held at once, over the queue's limit 2, when lease 12 of job c was granted"}},
		{"KeyOverItsLimit", []Lease{
			l("a", "acme", 10, 0, 50), l("b", "zeta", 11, 10, 60), l("c", "acme", 12, 49, 80),
		}, 3, 1, LimitPeaks{Queue: 3, Key: 2}, []string{`2 leases of key acme held at once, over its limit 1, when lease 12 of job c was granted: a/10 key "acme"`}},
		{"ARunningLeaseCountsToTheEnd", []Lease{
			l("a", "", 10, 0, math.MaxInt64), l("b", "", 11, 1000, 2000),
		}, 1, 1, LimitPeaks{Queue: 2}, []string{"over the queue's limit 1, when lease 11 of job b"}},
		{"JobsWithoutAKeyCountOnlyForTheQueue", []Lease{
			l("a", "", 10, 0, 50), l("b", "", 11, 10, 60),
		}, 2, 1, LimitPeaks{Queue: 2}, nil},
		{"AnEndBeforeItsStart", []Lease{l("a", "", 10, 50, 40)}, 1, 0, LimitPeaks{}, []string{"lease 10 of job a ends 0.000s before it starts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peaks, problems := Limits(tc.leases, tc.conc, tc.key)
			if peaks != tc.peaks {
				t.Errorf("peaks %+v, want %+v", peaks, tc.peaks)
			}
			if len(problems) != len(tc.want) {
				t.Fatalf("problems %q, want %d like %q", problems, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %q, want it to contain %q", problems[i], w)
				}
			}
		})
	}
}

func TestLimitsCountsEachExcessUpToACap(t *testing.T) {
	var leases []Lease
	for i := range 30 {
		leases = append(leases, Lease{Job: "j", Lease: uint64(10 + i), Start: int64(i), End: 1000})
	}
	_, problems := Limits(leases, 5, 0)
	if len(problems) != maxLimitProblems+1 || problems[maxLimitProblems] != "and 15 more excesses" {
		t.Fatalf("problems: %q", problems)
	}
}

func TestLeasesReadsEndedAndRunningAttempts(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1_700_000_000_000 + ms)) }
	started := at(300)
	jobs := []wire.Job{
		{ID: "a", ConcurrencyKey: "acme", Status: wire.StatusRunning, Lease: 30, StartedAt: &started, AttemptHistory: []wire.Attempt{
			{Attempt: 1, Lease: 10, Started: at(0), Ended: at(100), Expired: true},
		}},
		{ID: "b", Status: wire.StatusDone, AttemptHistory: []wire.Attempt{{Attempt: 1, Lease: 20, Started: at(100), Ended: at(200)}}},
	}
	got := Leases(jobs)
	want := []Lease{
		{Job: "a", Key: "acme", Lease: 10, Start: at(0).UnixNano(), End: at(100).UnixNano()},
		{Job: "a", Key: "acme", Lease: 30, Start: at(300).UnixNano(), End: math.MaxInt64},
		{Job: "b", Lease: 20, Start: at(100).UnixNano(), End: at(200).UnixNano()},
	}
	if len(got) != len(want) {
		t.Fatalf("leases %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("lease %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
