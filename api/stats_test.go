package api

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestStatsSeries: GET /stats/series over jobs submitted, claimed, done
// and failed at known minutes gives those counts, the depth at the end of
// each minute and the submit → start latency; a queue narrows it; bad
// windows are 400s naming the field; a scan budget too small says partial.
func TestStatsSeries(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T, mutate func(*Config)) *schedEnv {
		e := newSchedEnv(t, start, mutate)
		submit := func(queue string) wire.Job {
			var j wire.Job
			if code, werr := e.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", Queue: queue, MaxAttempts: wire.Limit(1)}, &j); code != http.StatusCreated {
				t.Fatalf("submit: %d %+v", code, werr)
			}
			return j
		}
		e.clock.Set(start.Add(10 * time.Second))
		submit("a")
		submit("a")
		submit("a")
		e.clock.Set(start.Add(70 * time.Second))
		var res wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: "w1", Queues: []string{"a"}, Max: 2}, &res); code != http.StatusOK || len(res.Jobs) != 2 {
			t.Fatalf("claim: %d %+v %d jobs", code, werr, len(res.Jobs))
		}
		e.clock.Set(start.Add(130 * time.Second))
		if code, werr := e.do(http.MethodPost, "/jobs/"+res.Jobs[0].ID+"/done", wire.ReportRequest{Lease: res.Jobs[0].Lease}, nil); code != http.StatusOK {
			t.Fatalf("done: %d %+v", code, werr)
		}
		e.clock.Set(start.Add(140 * time.Second))
		if code, werr := e.do(http.MethodPost, "/jobs/"+res.Jobs[1].ID+"/fail", wire.ReportRequest{Lease: res.Jobs[1].Lease, Error: "boom"}, nil); code != http.StatusOK {
			t.Fatalf("fail: %d %+v", code, werr)
		}
		e.clock.Set(start.Add(180 * time.Second))
		submit("b")
		e.clock.Set(start.Add(270 * time.Second))
		return e
	}
	get := func(t *testing.T, e *schedEnv, query string) wire.Series {
		t.Helper()
		var s wire.Series
		if code, werr := e.do(http.MethodGet, "/stats/series?"+query, nil, &s); code != http.StatusOK {
			t.Fatalf("GET /stats/series?%s: %d %+v", query, code, werr)
		}
		return s
	}
	from := "from=" + start.Format(time.RFC3339)

	t.Run("CountsDepthLatency", func(t *testing.T) {
		e := setup(t, nil)
		s := get(t, e, from)
		if !s.From.Equal(start) || !s.To.Equal(start.Add(5*time.Minute)) || s.StepSeconds != 60 || s.Partial || s.Scanned != 4 || s.AppliedIndex == 0 {
			t.Fatalf("window %v..%v step %d partial %v scanned %d applied %d", s.From, s.To, s.StepSeconds, s.Partial, s.Scanned, s.AppliedIndex)
		}
		want := wire.QueueSeries{
			Submitted: []int{3, 0, 0, 1, 0},
			Started:   []int{0, 2, 0, 0, 0},
			Done:      []int{0, 0, 1, 0, 0},
			Failed:    []int{0, 0, 1, 0, 0},
			Cancelled: []int{0, 0, 0, 0, 0},
			Depth:     []int{3, 1, 1, 2, 2},
			// 60 s: the bucket up to 2^16 ms.
			LatencyP50MS: []int64{0, 65536, 0, 0, 0},
			LatencyP95MS: []int64{0, 65536, 0, 0, 0},
		}
		if !reflect.DeepEqual(s.Total, want) {
			t.Errorf("total\n got %+v\nwant %+v", s.Total, want)
		}
		if len(s.Queues) != 2 || s.Queues[0].Queue != "a" || s.Queues[1].Queue != "b" || s.QueuesLeftOut {
			t.Fatalf("queues %+v", s.Queues)
		}
		if got := s.Queues[1].Depth; !reflect.DeepEqual(got, []int{0, 0, 0, 1, 1}) {
			t.Errorf("queue b depth %v", got)
		}
		b := get(t, e, from+"&queue=b")
		if len(b.Queues) != 1 || !reflect.DeepEqual(b.Total.Submitted, []int{0, 0, 0, 1, 0}) {
			t.Errorf("queue=b: %+v", b)
		}
		five := get(t, e, from+"&step=5m")
		if five.StepSeconds != 300 || !reflect.DeepEqual(five.Total.Done, []int{1}) || !reflect.DeepEqual(five.Total.Depth, []int{2}) {
			t.Errorf("step=5m: %+v", five.Total)
		}
	})

	t.Run("OldJobsStillWaitingCountInDepth", func(t *testing.T) {
		e := newSchedEnv(t, start.Add(-2*time.Hour), nil)
		for _, q := range []string{"old", "old", "other"} {
			if code, werr := e.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", Queue: q}, nil); code != http.StatusCreated {
				t.Fatalf("submit: %d %+v", code, werr)
			}
		}
		e.clock.Set(start.Add(90 * time.Second))
		s := get(t, e, from+"&queue=old")
		if !reflect.DeepEqual(s.Total.Depth, []int{2, 2}) || !reflect.DeepEqual(s.Total.Submitted, []int{0, 0}) || s.Scanned != 2 || s.Partial {
			t.Errorf("depth %v submitted %v scanned %d partial %v: want the two old jobs waiting, read through the queue's index",
				s.Total.Depth, s.Total.Submitted, s.Scanned, s.Partial)
		}
		s = get(t, e, from)
		if !reflect.DeepEqual(s.Total.Depth, []int{3, 3}) || s.Scanned != 3 {
			t.Errorf("every queue: depth %v scanned %d", s.Total.Depth, s.Scanned)
		}
	})

	t.Run("BadWindows", func(t *testing.T) {
		e := setup(t, nil)
		for query, field := range map[string]string{
			"step=30s":       "step",
			"step=2h":        "step",
			"step=90s":       "step",
			"step=x":         "step",
			"from=yesterday": "from",
			"to=now":         "to",
			"from=2026-11-27T13:00:00Z&to=2026-11-27T12:00:00Z": "from",
			"from=2026-11-26T00:00:00Z":                         "from", // 1,625 steps of 1m
			"queue=no%20spaces":                                 "queue",
		} {
			code, werr := e.do(http.MethodGet, "/stats/series?"+query, nil, nil)
			if code != http.StatusBadRequest || !strings.HasPrefix(werr.Error, field+":") {
				t.Errorf("%s: %d %+v, want 400 naming %s", query, code, werr, field)
			}
		}
	})

	t.Run("ScanBudgetSaysPartial", func(t *testing.T) {
		e := setup(t, func(c *Config) { c.SeriesScan = 2 })
		s := get(t, e, from)
		if !s.Partial || s.Scanned != 2 || s.CompleteFrom == nil || !s.CompleteFrom.Equal(start.Add(10*time.Second)) {
			t.Errorf("partial %v scanned %d complete_from %v", s.Partial, s.Scanned, s.CompleteFrom)
		}
		if !reflect.DeepEqual(s.Total.Submitted, []int{1, 0, 0, 1, 0}) {
			t.Errorf("submitted %v: the two newest jobs only", s.Total.Submitted)
		}
	})
}
