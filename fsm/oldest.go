package fsm

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// maxDueScan bounds how many delayed-but-due jobs OldestReady looks at: jobs
// whose run time passed since the last applied entry (they move to their
// ready trees on the next claim).
const maxDueScan = 1024

// OldestReady returns, for each queue with a job that is due to run at now
// (Unix ns) and not yet claimed, the earliest run time (Unix ns) among those
// jobs: when the longest-waiting one became runnable (its submission, its
// run_at, its unblocking or its retry). It reads only the in-memory ready
// trees: one descent per distinct priority of each queue and job type, and
// at most maxDueScan delayed jobs, never a scan of every job.
func (f *FSM) OldestReady(now int64) map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.oldestReadyLocked(now)
}

// AnyQueues is the queue list of a claim from any queue (the v0 worker API's GET
// /jobs/next without a queue): DefaultQueue, then the unpaused queues with a
// job due at now, the longest-waiting first (by OldestReady; ties by name),
// limit queues in all. However many queues there are, the claim stays
// bounded, and a queue that waits long comes first.
func (f *FSM) AnyQueues(now int64, limit int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	oldest := f.oldestReadyLocked(now)
	names := make([]string, 0, len(oldest))
	for q := range oldest {
		if q != DefaultQueue && !f.idx.paused[q] {
			names = append(names, q)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(oldest[a], oldest[b]), strings.Compare(a, b))
	})
	return append([]string{DefaultQueue}, names[:min(len(names), max(limit-1, 0))]...)
}

func (f *FSM) oldestReadyLocked(now int64) map[string]int64 {
	out := make(map[string]int64)
	keep := func(queue string, runAt int64) {
		if old, ok := out[queue]; !ok || runAt < old {
			out[queue] = runAt
		}
	}
	for k, t := range f.idx.ready {
		// A tree orders by priority (highest first), then run time: the
		// first item of each priority has that priority's earliest time.
		it, ok := t.Min()
		for ok {
			keep(k.queue, it.runAt)
			if it.prio == math.MinInt {
				break
			}
			next := readyItem{prio: it.prio - 1, runAt: math.MinInt64}
			ok = false
			t.AscendGreaterOrEqual(next, func(n readyItem) bool {
				it, ok = n, true
				return false
			})
		}
	}
	seen := 0
	f.idx.delayed.Ascend(func(it readyItem) bool {
		if it.runAt > now || seen >= maxDueScan {
			return false
		}
		seen++
		keep(f.idx.queueOf(it), it.runAt)
		return true
	})
	return out
}
