package series_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/workron/workron/api/series"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

const min = int64(time.Minute)

// at is minute m of the window plus s seconds.
func at(m int, s int) int64 { return int64(m)*min + int64(s)*int64(time.Second) }

func TestSeries(t *testing.T) {
	// A window of 5 minutes, now 30 s into the last one.
	w := series.Window{From: 0, To: 5 * min, Step: min, Now: at(4, 30)}
	jobs := []*store.Job{
		// Submitted in minute 0, started 2 s later, done in minute 1.
		{Queue: "a", Status: store.StatusDone, CreatedAt: at(0, 10), StartedAt: at(0, 12), DoneAt: at(1, 0)},
		// Submitted in minute 0, waited until minute 2 (depth at the ends of
		// minutes 0 and 1), failed in minute 3 after a retry: its latency
		// is its first attempt's.
		{Queue: "a", Status: store.StatusFailed, CreatedAt: at(0, 20), StartedAt: at(3, 0), DoneAt: at(3, 5), RunAt: at(2, 50),
			History: []store.Attempt{{Started: at(2, 20)}, {Started: at(3, 0)}}},
		// Still waiting: depth from minute 1 on, the minute under way too.
		{Queue: "b", Status: store.StatusPending, CreatedAt: at(1, 0), RunAt: at(1, 0)},
		// Due later than submitted: waiting from its run_at.
		{Queue: "b", Status: store.StatusRunning, CreatedAt: at(0, 0), RunAt: at(3, 0), StartedAt: at(3, 30)},
		// Cancelled before it started: waited until then.
		{Queue: "b", Status: store.StatusCancelled, CreatedAt: at(2, 0), DoneAt: at(2, 30)},
		// Before the window: only its wait shows.
		{Queue: "b", Status: store.StatusDone, CreatedAt: -at(10, 0), RunAt: -at(10, 0), StartedAt: at(0, 30), DoneAt: at(0, 40)},
	}
	b := series.New(w, "")
	for _, j := range jobs {
		b.Add(j)
	}
	got := b.Result()
	if got.StepSeconds != 60 || !got.From.Equal(time.Unix(0, 0)) || !got.To.Equal(time.Unix(300, 0)) {
		t.Fatalf("window: from %v to %v step %d", got.From, got.To, got.StepSeconds)
	}
	want := wire.QueueSeries{
		Submitted: []int{3, 1, 1, 0, 0},
		Started:   []int{2, 0, 1, 1, 0},
		Done:      []int{1, 1, 0, 0, 0},
		Failed:    []int{0, 0, 0, 1, 0},
		Cancelled: []int{0, 0, 1, 0, 0},
		// End of minute 0: job 2; 1: jobs 2, 3; 2: job 3 (job 2 started
		// at 2:20, job 5 cancelled at 2:30); 3: job 3, job 4 (due 3:00,
		// started 3:30) no; 4 (at now): job 3.
		Depth: []int{1, 2, 1, 1, 1},
		// Minute 0: 2 s and 30 s + 10 min; minute 2: 2 min; minute 3: 30 s.
		LatencyP50MS: []int64{2048, 0, 131072, 32768, 0},
		LatencyP95MS: []int64{741455, 0, 131072, 32768, 0},
	}
	if !reflect.DeepEqual(got.Total, want) {
		t.Errorf("total:\n got %+v\nwant %+v", got.Total, want)
	}
	if len(got.Queues) != 2 || got.Queues[0].Queue != "a" || got.Queues[1].Queue != "b" {
		t.Fatalf("queues: %+v", got.Queues)
	}
	if a := got.Queues[0]; !reflect.DeepEqual(a.Done, []int{0, 1, 0, 0, 0}) || !reflect.DeepEqual(a.Depth, []int{1, 1, 0, 0, 0}) {
		t.Errorf("queue a: done %v depth %v", a.Done, a.Depth)
	}

	t.Run("OneQueue", func(t *testing.T) {
		b := series.New(w, "a")
		for _, j := range jobs {
			b.Add(j)
		}
		got := b.Result()
		if len(got.Queues) != 1 || got.Total.Submitted[0] != 2 || !reflect.DeepEqual(got.Total.Depth, got.Queues[0].Depth) {
			t.Errorf("queue a only: %+v", got)
		}
	})

	t.Run("QueuesBounded", func(t *testing.T) {
		b := series.New(w, "")
		for i := range wire.MaxSeriesQueues + 5 {
			b.Add(&store.Job{Queue: fmt.Sprintf("q%02d", i), Status: store.StatusPending, CreatedAt: at(0, 0)})
		}
		got := b.Result()
		if len(got.Queues) != wire.MaxSeriesQueues || !got.QueuesLeftOut || got.Total.Submitted[0] != wire.MaxSeriesQueues+5 {
			t.Errorf("%d queues, left out %v, total %d", len(got.Queues), got.QueuesLeftOut, got.Total.Submitted[0])
		}
	})

	t.Run("SameJobsAnyOrderSameSeries", func(t *testing.T) {
		b := series.New(w, "")
		for i := len(jobs) - 1; i >= 0; i-- {
			b.Add(jobs[i])
		}
		if r := b.Result(); !reflect.DeepEqual(r, got) {
			t.Errorf("reversed order gives\n%+v\nnot\n%+v", r, got)
		}
	})
}
