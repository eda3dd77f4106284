// Package series turns job records into the per-step series of GET
// /stats/series: jobs submitted, started, done, failed and cancelled per
// step, the queue's depth at the end of each step and the percentiles of
// submit → first start. It is a pure function of the jobs it is given (no
// clock but the now it is told, no map order in its output), so two nodes
// that hold the same jobs give the same series.
package series

import (
	"math"
	"sort"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

// Latency histogram: bucket i holds latencies up to 2^(i/2) ms, the last
// one everything longer (2^((buckets-1)/2) ms is about 4.6 h).
const buckets = 50

// Window is the span and step asked for, in Unix nanoseconds.
type Window struct {
	From, To, Step int64
	Now            int64 // the depth of the step under way is counted at Now
}

// Points is how many steps the window has.
func (w Window) Points() int { return int((w.To - w.From) / w.Step) }

// Builder accumulates jobs. Add each job once; Result gives the series.
type Builder struct {
	w      Window
	only   string // a single queue, or "" for every queue
	total  *acc
	queues map[string]*acc
	left   bool
}

type acc struct {
	submitted, started, done, failed, cancelled []int
	depth                                       []int // a difference array until Result
	hist                                        [][]uint32
}

func newAcc(n int) *acc {
	return &acc{
		submitted: make([]int, n), started: make([]int, n), done: make([]int, n),
		failed: make([]int, n), cancelled: make([]int, n), depth: make([]int, n+1),
		hist: make([][]uint32, n),
	}
}

// New starts a builder for the window; queue, when set, keeps only its jobs.
func New(w Window, queue string) *Builder {
	return &Builder{w: w, only: queue, total: newAcc(w.Points()), queues: map[string]*acc{}}
}

// Add counts one job.
func (b *Builder) Add(j *store.Job) {
	if b.only != "" && j.Queue != b.only {
		return
	}
	q := b.queues[j.Queue]
	if q == nil {
		if len(b.queues) >= wire.MaxSeriesQueues {
			b.left = true
		} else {
			q = newAcc(b.w.Points())
			b.queues[j.Queue] = q
		}
	}
	b.add(b.total, j)
	if q != nil {
		b.add(q, j)
	}
}

// index is the step holding t, or -1 outside the window.
func (b *Builder) index(t int64) int {
	if t < b.w.From || t >= b.w.To {
		return -1
	}
	return int((t - b.w.From) / b.Step())
}

// Step is the window's step.
func (b *Builder) Step() int64 { return b.w.Step }

// firstEndAfter is the first step whose end (or Now, for the step under
// way) is after t: the first point at which something that began at t is
// seen. A job is waiting at the end e of a step when ready < e <= leave.
func (b *Builder) firstEndAfter(t int64) int {
	n := b.w.Points()
	if t < b.w.From {
		return 0
	}
	i := int((t - b.w.From) / b.w.Step)
	for i > 0 && b.end(i-1) > t {
		i--
	}
	for i < n && b.end(i) <= t {
		i++
	}
	return min(i, n)
}

func (b *Builder) end(i int) int64 {
	e := b.w.From + int64(i+1)*b.w.Step
	if b.w.Now < e && b.w.Now >= e-b.w.Step {
		return b.w.Now
	}
	return e
}

func (b *Builder) add(a *acc, j *store.Job) {
	if i := b.index(j.CreatedAt); i >= 0 {
		a.submitted[i]++
	}
	ready, start := j.CreatedAt, j.StartedAt
	if len(j.History) > 0 {
		start = j.History[0].Started // the first attempt's start
	} else if j.RunAt > ready {
		ready = j.RunAt // never retried: RunAt is still when it was due
	}
	if start != 0 {
		if i := b.index(start); i >= 0 {
			a.started[i]++
			if a.hist[i] == nil {
				a.hist[i] = make([]uint32, buckets)
			}
			a.hist[i][bucket(start-ready)]++
		}
	}
	if j.Status.Finished() {
		if i := b.index(j.DoneAt); i >= 0 {
			switch j.Status {
			case store.StatusDone:
				a.done[i]++
			case store.StatusFailed:
				a.failed[i]++
			default:
				a.cancelled[i]++
			}
		}
	}
	// Waiting from ready until its first start, its end without a start,
	// or still: at the ends e of steps with ready < e <= leave.
	leave := int64(math.MaxInt64)
	switch {
	case start != 0:
		leave = start
	case j.Status.Finished():
		leave = j.DoneAt
	}
	if leave <= ready {
		return
	}
	from, to := b.firstEndAfter(ready), b.firstEndAfter(leave)
	if leave == math.MaxInt64 {
		to = b.w.Points()
	}
	if from < to {
		a.depth[from]++
		a.depth[to]--
	}
}

// bucket is the histogram bucket of a latency in nanoseconds.
func bucket(ns int64) int {
	ms := float64(ns) / 1e6
	if ms <= 1 {
		return 0
	}
	i := int(math.Ceil(2 * math.Log2(ms)))
	return min(i, buckets-1)
}

// upper is the latency, in ms, a bucket's jobs took at most.
func upper(i int) int64 {
	return int64(math.Round(math.Pow(2, float64(i)/2)))
}

// quantile is the upper bound of the bucket holding the q-th latency.
func quantile(h []uint32, q float64) int64 {
	if h == nil {
		return 0
	}
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range h {
		seen += uint64(c)
		if seen >= rank && c > 0 {
			return upper(i)
		}
	}
	return upper(len(h) - 1)
}

func (b *Builder) result(a *acc, queue string) wire.QueueSeries {
	n := b.w.Points()
	out := wire.QueueSeries{Queue: queue, Submitted: a.submitted, Started: a.started, Done: a.done,
		Failed: a.failed, Cancelled: a.cancelled, Depth: make([]int, n),
		LatencyP50MS: make([]int64, n), LatencyP95MS: make([]int64, n)}
	d := 0
	for i := range n {
		d += a.depth[i]
		out.Depth[i] = d
		out.LatencyP50MS[i] = quantile(a.hist[i], 0.5)
		out.LatencyP95MS[i] = quantile(a.hist[i], 0.95)
	}
	return out
}

// Result gives the series of the jobs added, queues by name. The steps
// after Now are left as they are (no job can be in them).
func (b *Builder) Result() wire.Series {
	out := wire.Series{
		From: time.Unix(0, b.w.From).UTC(), To: time.Unix(0, b.w.To).UTC(), StepSeconds: b.w.Step / int64(time.Second),
		Total: b.result(b.total, ""), Queues: []wire.QueueSeries{}, QueuesLeftOut: b.left,
	}
	names := make([]string, 0, len(b.queues))
	for q := range b.queues {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		out.Queues = append(out.Queues, b.result(b.queues[q], q))
	}
	return out
}
