package api

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/workron/workron/api/jobfilter"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

// Listing limits. A list page examines at most Config.ListScan jobs
// (MaxListScan by default), or MaxListScanBytes of their records, and a
// count Config.CountScan (MaxCountScan) or MaxCountScanBytes: a request
// that runs out of its budget ends early with a next_cursor to go on from,
// and says so (wire.JobList Partial, wire.JobCount Exact false).
const (
	DefaultListLimit  = 50
	MaxListLimit      = 1000
	MaxListScan       = 10_000
	MaxListScanBytes  = 8 << 20
	MaxCountScan      = 100_000
	MaxCountScanBytes = 64 << 20
	MaxListFilters    = 16 // metadata.K=V parameters
)

// handleList serves GET
// /jobs?filter=&status=&queue=&metadata.k=v&limit=&cursor=: the jobs every
// given condition keeps, newest first, with how many it examined and
// whether the page ended early on its scan budget.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			s.fail(w, r, invalid("limit", "must be a number from 1 to %d, got %q", MaxListLimit, v))
			return
		}
		limit = n
	}
	before, err := jobCursor(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now()
	f, err := jobQuery(q, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var scan scanTally
	sq := storeQuery(f, store.ListQuery{Before: before, Limit: limit, Scan: budget(s.cfg.ListScan, MaxListScan), ScanBytes: MaxListScanBytes})
	sq.Match = scan.counting(sq.Match)
	jobs, next, err := s.state.ListJobs(sq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.JobList{Jobs: toWireList(jobs, now), Scanned: scan.n}
	s.explainAll(out.Jobs, jobs)
	if next != 0 && len(jobs) < limit {
		out.Partial = true
		next = scan.resumeAt(next)
	}
	if next != 0 {
		out.NextCursor = strconv.FormatUint(next, 10)
	}
	writeJobList(w, http.StatusOK, out)
}

// handleCount serves GET /jobs/count, with the conditions of GET /jobs:
// how many jobs they keep, by status, exact when the count got to the end
// within its scan budget.
func (s *Server) handleCount(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	before, err := jobCursor(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now()
	f, err := jobQuery(q, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	scanBudget := budget(s.cfg.CountScan, MaxCountScan)
	if f.OnlyTerms() {
		out, ok, err := s.countByIndex(f, before, now)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if ok {
			writeJSON(w, http.StatusOK, out)
			return
		}
	}
	out, err := s.countByReading(f, before, scanBudget, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// countByReading counts a filter by reading each job the index gives for
// its terms (all of them, without one), at most scan of them or
// MaxCountScanBytes of their records.
func (s *Server) countByReading(f *jobfilter.Filter, before uint64, scan int, now int64) (wire.JobCount, error) {
	out := wire.JobCount{ByStatus: map[string]int{}}
	var tally scanTally
	sq := storeQuery(f, store.ListQuery{Before: before, Scan: scan, ScanBytes: MaxCountScanBytes})
	keep := sq.Match
	sq.Match = tally.counting(func(j *store.Job) bool {
		if keep == nil || keep(j) {
			out.Count++
			out.ByStatus[jobfilter.ShownStatus(j, now)]++
		}
		return false // counted, not kept: the page stays empty
	})
	_, next, err := s.state.ListJobs(sq)
	if err != nil {
		return wire.JobCount{}, err
	}
	out.Scanned, out.Exact = tally.n, next == 0
	if next != 0 {
		out.NextCursor = strconv.FormatUint(tally.resumeAt(next), 10)
	}
	return out, nil
}

// countByIndex counts a filter whose terms say all it does
// (jobfilter.Filter.OnlyTerms) from the search index, by status, in one
// read that reads no job record (fsm.FSM.CountByStatus): the lists'
// lengths give the stored statuses, and the FSM's delayed jobs which of the
// pending ones are scheduled. Its cost follows the index's epochs and
// lists, not a scan budget; ok is false, and the caller counts by reading
// (countByReading), when the index cannot answer the filter.
func (s *Server) countByIndex(f *jobfilter.Filter, before uint64, now int64) (out wire.JobCount, ok bool, err error) {
	q := storeQuery(f, store.ListQuery{Before: before})
	q.Match = nil // the terms say all of it
	c, err := s.state.CountByStatus(q, now)
	if errors.Is(err, store.ErrNotIndexed) {
		return wire.JobCount{}, false, nil
	}
	if err != nil {
		return wire.JobCount{}, false, err
	}
	out.ByStatus, out.Exact = map[string]int{}, true
	for st, n := range c.ByStatus {
		out.Count += n
		if st == store.StatusPending && c.Among > 0 {
			out.ByStatus["scheduled"] = c.Among
			n -= c.Among
		}
		if n > 0 {
			out.ByStatus[string(st)] = n
		}
	}
	return out, true, nil
}

// storeQuery is where a filter meets the store's indexes: a status term
// picks the status, the equality terms of queue, type, concurrency key,
// schedule and metadata become the store's index terms, a created_at range
// its CreatedFrom and CreatedTo, and the filter's Match decides the rest
// (every term of f.Terms() holds for every job Match keeps, so an index
// that serves any of them may stand in for the scan).
func storeQuery(f *jobfilter.Filter, q store.ListQuery) store.ListQuery {
	status := false
	for _, t := range f.Terms() {
		switch t.Field {
		case jobfilter.FieldStatus:
			if !status {
				q.Status, status = store.Status(t.Value), true
			}
		case jobfilter.FieldQueue, jobfilter.FieldType, jobfilter.FieldConcurrencyKey, jobfilter.FieldSchedule, jobfilter.FieldMetadata:
			q.Terms = append(q.Terms, store.IndexTerm{Field: string(t.Field), Key: t.Key, Value: t.Value})
		case jobfilter.FieldCreated:
			q.CreatedFrom = max(q.CreatedFrom, t.From)
			if t.To != math.MaxInt64 && (q.CreatedTo == 0 || t.To < q.CreatedTo) {
				q.CreatedTo = t.To
			}
		}
	}
	if !f.Empty() {
		q.Match = f.Match
	}
	return q
}

// jobQuery reads the conditions of a list or a count: ?filter= (the
// jobfilter language) and the older ?status=, ?queue= and ?metadata.K=V,
// all of which must hold. A bad one is an invalid-field error naming it
// (for filter=, with the column where it goes wrong).
func jobQuery(q url.Values, now int64) (*jobfilter.Filter, error) {
	var parts []*jobfilter.Filter
	if text := q.Get("filter"); text != "" {
		f, err := jobfilter.Compile(text, now)
		if err != nil {
			return nil, invalid("filter", "%v", err)
		}
		parts = append(parts, f)
	}
	if status := q.Get("status"); status != "" {
		f, err := jobfilter.Equal("status", status, now)
		if err != nil {
			return nil, invalid("status", "%q is not one of %s", status, strings.Join(jobfilter.Statuses, ", "))
		}
		parts = append(parts, f)
	}
	if queue := q.Get("queue"); queue != "" {
		f, err := jobfilter.Equal("queue", queue, now)
		if err != nil {
			return nil, invalid("queue", "%v", err)
		}
		parts = append(parts, f)
	}
	filters := 0
	for k, vs := range q {
		if name, ok := strings.CutPrefix(k, "metadata."); ok && len(vs) > 0 {
			if filters++; filters > MaxListFilters {
				return nil, invalid("metadata", "more than %d metadata.K=V filters", MaxListFilters)
			}
			f, err := jobfilter.Equal("metadata."+name, vs[0], now)
			if err != nil {
				return nil, invalid(k, "%v", err)
			}
			parts = append(parts, f)
		}
	}
	return jobfilter.And(parts...), nil
}

// jobCursor reads ?cursor=, the next_cursor of a previous page or count
// (0 without one).
func jobCursor(q url.Values) (uint64, error) {
	v := q.Get("cursor")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, invalid("cursor", "%q is not a cursor from a previous page", v)
	}
	return n, nil
}

// budget is a configured scan budget, or def when unset.
func budget(configured, def int) int {
	if configured > 0 {
		return configured
	}
	return def
}

// scanTally counts the jobs a store scan examines (every job it decodes
// goes through its Match) and remembers the last.
type scanTally struct {
	n    int
	last uint64 // the Seq of the last job examined
}

// counting wraps match (nil keeps every job) to count what it is given.
func (t *scanTally) counting(match func(*store.Job) bool) func(*store.Job) bool {
	return func(j *store.Job) bool {
		t.n++
		t.last = j.Seq
		return match == nil || match(j)
	}
}

// resumeAt is the cursor of a scan that ran out of budget: just past the
// last job it examined, so that the next request examines none twice
// (the store's own cursor, next, is the last job kept).
func (t *scanTally) resumeAt(next uint64) uint64 {
	if t.n == 0 {
		return next
	}
	return t.last
}
