package jobcheck

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/workron/workron/api/wire"
)

// Lease is one attempt as the cluster saw it: its lease was held from
// Start, the time of the entry that claimed it, until End, the time of the
// entry that applied its report or its expiry (math.MaxInt64 while it still
// runs). Times are Unix nanoseconds of the cluster's clock.
type Lease struct {
	Job   string
	Key   string // the job's concurrency key
	Lease uint64
	Start int64
	End   int64
}

// Leases lists the attempts of jobs, ended and running, as Lease records.
func Leases(jobs []wire.Job) []Lease {
	var out []Lease
	for _, j := range jobs {
		for _, a := range j.AttemptHistory {
			out = append(out, Lease{Job: j.ID, Key: j.ConcurrencyKey, Lease: a.Lease, Start: a.Started.UnixNano(), End: a.Ended.UnixNano()})
		}
		if (j.Status == wire.StatusRunning || j.Status == wire.StatusCancelling) && j.StartedAt != nil {
			out = append(out, Lease{Job: j.ID, Key: j.ConcurrencyKey, Lease: j.Lease, Start: j.StartedAt.UnixNano(), End: math.MaxInt64})
		}
	}
	return out
}

// LimitPeaks are the most leases held at once: in the whole queue, and by
// the busiest key.
type LimitPeaks struct {
	Queue, Key int
}

// maxLimitProblems is how many excesses Limits describes; it counts the rest.
const maxLimitProblems = 10

// Limits checks that a queue's leases never exceeded its concurrency, in
// all, or keyConcurrency for any one key (0: no such limit), and returns
// the peaks it saw and the excesses as sentences (a lease that ends before
// it starts is one too: the reasoning below needs ends after starts).
//
// It checks the cluster's view, which is what the limits promise: a lease
// counts from the entry that granted it to the entry that ended it (a
// worker that lost its lease may still run the job for a while; the cluster
// no longer counts it, and a fenced report from it is refused). Entry
// times never go back along the log (the state machine takes the greater
// of an entry's time and the last one), so a lease that ended at a later
// time than another started overlapped it, and one that ended earlier did
// not: every excess reported is certain. Only an end and a start stamped
// with the same nanosecond cannot be ordered; those count as not
// overlapping, so an excess hidden in such a tie goes unseen.
//
// A lease that ends in the nanosecond it starts (entry times stand still
// while the leader's clock is behind the log's) is in such a tie with
// every lease that starts or ends then, so it counts only beside the
// leases held strictly across that instant (pointExcesses).
func Limits(leases []Lease, concurrency, keyConcurrency int) (LimitPeaks, []string) {
	type event struct {
		t     int64
		start bool
		l     Lease
	}
	var (
		problems []string
		points   []Lease // leases that end when they start
	)
	events := make([]event, 0, 2*len(leases))
	for _, l := range leases {
		switch {
		case l.End < l.Start:
			problems = append(problems, fmt.Sprintf("lease %d of job %s ends %.3fs before it starts", l.Lease, l.Job, float64(l.Start-l.End)/1e9))
			continue
		case l.End == l.Start:
			points = append(points, l)
			continue
		}
		events = append(events, event{t: l.Start, start: true, l: l}, event{t: l.End, l: l})
	}
	sort.Slice(events, func(i, k int) bool {
		a, b := events[i], events[k]
		if a.t != b.t {
			return a.t < b.t
		}
		if a.start != b.start {
			return !a.start // ends first: a tie counts as no overlap
		}
		return a.l.Lease < b.l.Lease
	})
	var (
		peaks LimitPeaks
		held  = make(map[uint64]Lease)
		byKey = make(map[string]int)
	)
	for _, e := range events {
		if !e.start {
			delete(held, e.l.Lease)
			if e.l.Key != "" {
				byKey[e.l.Key]--
			}
			continue
		}
		held[e.l.Lease] = e.l
		peaks.Queue = max(peaks.Queue, len(held))
		if concurrency > 0 && len(held) > concurrency {
			problems = append(problems, fmt.Sprintf("%d leases held at once, over the queue's limit %d, when lease %d of job %s was granted: %s",
				len(held), concurrency, e.l.Lease, e.l.Job, describeHeld(held, "")))
		}
		if e.l.Key == "" {
			continue
		}
		byKey[e.l.Key]++
		peaks.Key = max(peaks.Key, byKey[e.l.Key])
		if keyConcurrency > 0 && byKey[e.l.Key] > keyConcurrency {
			problems = append(problems, fmt.Sprintf("%d leases of key %s held at once, over its limit %d, when lease %d of job %s was granted: %s",
				byKey[e.l.Key], e.l.Key, keyConcurrency, e.l.Lease, e.l.Job, describeHeld(held, e.l.Key)))
		}
	}
	problems = append(problems, pointExcesses(leases, points, concurrency, keyConcurrency, &peaks)...)
	if len(problems) > maxLimitProblems {
		problems = append(problems[:maxLimitProblems], fmt.Sprintf("and %d more excesses", len(problems)-maxLimitProblems))
	}
	return peaks, problems
}

// pointExcesses checks each lease of points (Start == End) against the
// leases of longer life held strictly across its instant: those certainly
// overlapped it; leases that start or end at that instant cannot be
// ordered against it and count as not overlapping.
func pointExcesses(leases, points []Lease, concurrency, keyConcurrency int, peaks *LimitPeaks) []string {
	var problems []string
	for _, p := range points {
		held := map[uint64]Lease{p.Lease: p}
		keyHeld := 0
		for _, l := range leases {
			if l.Start < p.Start && p.Start < l.End {
				held[l.Lease] = l
				if p.Key != "" && l.Key == p.Key {
					keyHeld++
				}
			}
		}
		peaks.Queue = max(peaks.Queue, len(held))
		if concurrency > 0 && len(held) > concurrency {
			problems = append(problems, fmt.Sprintf("%d leases held at once, over the queue's limit %d, when lease %d of job %s was granted: %s",
				len(held), concurrency, p.Lease, p.Job, describeHeld(held, "")))
		}
		if p.Key == "" {
			continue
		}
		peaks.Key = max(peaks.Key, keyHeld+1)
		if keyConcurrency > 0 && keyHeld+1 > keyConcurrency {
			problems = append(problems, fmt.Sprintf("%d leases of key %s held at once, over its limit %d, when lease %d of job %s was granted: %s",
				keyHeld+1, p.Key, keyConcurrency, p.Lease, p.Job, describeHeld(held, p.Key)))
		}
	}
	return problems
}

// describeHeld lists the leases held (of key, unless ""), by lease.
func describeHeld(held map[uint64]Lease, key string) string {
	var ls []Lease
	for _, l := range held {
		if key == "" || l.Key == key {
			ls = append(ls, l)
		}
	}
	sort.Slice(ls, func(i, k int) bool { return ls[i].Lease < ls[k].Lease })
	parts := make([]string, len(ls))
	for i, l := range ls {
		end := "running"
		if l.End != math.MaxInt64 {
			end = fmt.Sprintf("until %+.3fs", float64(l.End-l.Start)/1e9)
		}
		parts[i] = fmt.Sprintf("%s/%d key %q %s", l.Job, l.Lease, l.Key, end)
	}
	return strings.Join(parts, ", ")
}
