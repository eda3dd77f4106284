package api

import (
	"net/http"
	"time"

	"github.com/workron/workron/api/series"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Bounds of GET /stats/series. A request examines at most Config.SeriesScan
// jobs (MaxSeriesScan by default) or MaxSeriesScanBytes of their records,
// in one read transaction; SeriesLookback is how long before the window a
// job may have been created and still be looked for (a job created earlier
// that ends in the window is not counted, unless it still waits: every job
// still waiting is).
const (
	MaxSeriesScan      = 100_000
	MaxSeriesScanBytes = 64 << 20
	SeriesLookback     = time.Hour
	seriesChunk        = 2_000
	maxSeriesCalls     = 64
	defaultSeriesSpan  = 3 * time.Hour
)

// handleSeries serves GET /stats/series?from=&to=&step=&queue=.
func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := s.now()
	win, err := seriesWindow(q.Get("from"), q.Get("to"), q.Get("step"), now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	queue := q.Get("queue")
	if queue != "" {
		if err := validName("queue", queue); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	b := series.New(win, queue)
	var out wire.Series
	err = s.state.ViewJobs(func(tx fsm.JobReader) error {
		var err error
		out, err = walkSeries(tx, b, queue, win.From-int64(SeriesLookback), budget(s.cfg.SeriesScan, MaxSeriesScan))
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// walkSeries adds to b the jobs created from cut on, newest first, then
// those created before cut that still wait or run, examining at most scan
// jobs in all, in at most maxSeriesCalls pages of at most
// MaxSeriesScanBytes/maxSeriesCalls bytes of records each. Both walks read
// the search index: the seqs of jobs created from cut on, the status
// lists, and with a queue, that queue's lists only.
func walkSeries(tx fsm.JobReader, b *series.Builder, queue string, cut int64, scan int) (wire.Series, error) {
	var (
		seen, calls int
		oldest      int64 // CreatedAt of the oldest job walked
		partial     bool
	)
	var terms []store.IndexTerm
	if queue != "" {
		terms = []store.IndexTerm{{Field: "queue", Value: queue}}
	}
	// walk pages through q from its newest job; false when the budget ran
	// out first.
	walk := func(q store.ListQuery) (bool, error) {
		q.Terms = terms
		q.Match = func(j *store.Job) bool {
			seen++
			oldest = j.CreatedAt
			b.Add(j)
			return false // counted, not kept
		}
		for {
			if seen >= scan || calls >= maxSeriesCalls {
				return false, nil
			}
			calls++
			q.Scan, q.ScanBytes = min(seriesChunk, scan-seen), MaxSeriesScanBytes/maxSeriesCalls
			_, next, err := tx.ListJobs(q)
			if err != nil || next == 0 {
				return true, err
			}
			q.Before = next
		}
	}
	whole, err := walk(store.ListQuery{CreatedFrom: cut})
	if err != nil {
		return wire.Series{}, err
	}
	partial = !whole
	complete := oldest
	if whole {
		// The jobs created before cut that still wait or run.
		for _, st := range []store.Status{store.StatusBlocked, store.StatusPending, store.StatusReserved, store.StatusRunning, store.StatusCancelling} {
			whole, err := walk(store.ListQuery{Status: st, CreatedTo: cut})
			if err != nil {
				return wire.Series{}, err
			}
			if !whole {
				partial, complete = true, 0 // depth may be short in every step
				break
			}
		}
	}
	out := b.Result()
	out.AppliedIndex, out.Scanned, out.Partial = tx.Applied(), seen, partial
	if partial && complete != 0 {
		t := time.Unix(0, complete).UTC()
		out.CompleteFrom = &t
	}
	return out, nil
}

// seriesWindow reads from, to (RFC 3339; default: now and 3 h before it)
// and step (a Go duration, whole minutes from 1m to 1h; default 1m). The
// window is widened to whole steps and ends at most at the step holding now.
func seriesWindow(fromS, toS, stepS string, now int64) (series.Window, error) {
	step := time.Minute
	if stepS != "" {
		d, err := time.ParseDuration(stepS)
		if err != nil || d < time.Minute || d > time.Hour || d%time.Minute != 0 {
			return series.Window{}, invalid("step", "must be whole minutes from 1m to 1h, got %q", stepS)
		}
		step = d
	}
	st := int64(step)
	to := now
	if toS != "" {
		t, err := time.Parse(time.RFC3339Nano, toS)
		if err != nil {
			return series.Window{}, invalid("to", "must be an RFC 3339 time, got %q", toS)
		}
		to = min(t.UnixNano(), now)
	}
	from := to - int64(defaultSeriesSpan)
	if fromS != "" {
		t, err := time.Parse(time.RFC3339Nano, fromS)
		if err != nil {
			return series.Window{}, invalid("from", "must be an RFC 3339 time, got %q", fromS)
		}
		from = t.UnixNano()
	}
	from = floorStep(from, st)
	to = floorStep(to, st) + st // the step holding to, whole
	if from >= to {
		return series.Window{}, invalid("from", "must be before to")
	}
	if n := (to - from) / st; n > wire.MaxSeriesPoints {
		return series.Window{}, invalid("from", "the window has %d steps of %s, more than %d", n, step, wire.MaxSeriesPoints)
	}
	return series.Window{From: from, To: to, Step: st, Now: now}, nil
}

func floorStep(t, step int64) int64 {
	r := t % step
	if r < 0 {
		r += step
	}
	return t - r
}
