package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/store"
)

// A job's parent results reach its worker in the claim reply, within
// bounds, and the rest by pages of GET /jobs/{id}/parent_results. Both read
// the parents in the order of the job's depends_on, one at a time, and stop
// at the first result that does not fit: what a reply carries is a prefix
// of that order, and a cursor is the index in depends_on where the rest
// begin. So no reply is built whole before its bound is applied, and every
// parent's result reaches the worker exactly once (the state machine keeps
// each parent once in a job's depends_on).

// withParentResults gives each claimed job that depends on others the
// results of those that returned one, so that its worker can hand them to
// it: at most wire.MaxClaimJobParentBytes per job and
// wire.MaxClaimParentBytes in all, in the order of jobs. A job that did
// not get them all is marked ParentResultsTruncated, with the cursor of
// the rest; a job reached once the reply's bound is spent gets none, and
// the cursor of its first parent. A parent gone meanwhile (deleted after
// its retention) is left out.
func (s *Server) withParentResults(jobs []wire.Job) {
	left := wire.MaxClaimParentBytes
	for i := range jobs {
		j := &jobs[i]
		if len(j.DependsOn) == 0 {
			continue
		}
		next := 0
		if left > 0 {
			res, n, used, err := s.parentResults(j.DependsOn, 0, len(j.DependsOn), min(left, wire.MaxClaimJobParentBytes), false)
			if err != nil {
				s.logger.Warn("read parent results", "job_id", j.ID, "err", err)
			}
			j.ParentResults, next, left = res, n, left-used
		}
		if next < len(j.DependsOn) {
			j.ParentResultsTruncated = true
			j.ParentResultsCursor = strconv.Itoa(next)
		}
	}
}

// parentResults reads the results of the parents ids[from:] names, in
// order, while they fit in maxBytes and number at most limit (at least one
// when atLeastOne, so that a page always moves on). It returns them, the
// index in ids of the first parent not read (len(ids) when all were), and
// the bytes they take in a reply. On an error it returns what it read
// before, with the index where it stopped.
func (s *Server) parentResults(ids []string, from, limit, maxBytes int, atLeastOne bool) (map[string]json.RawMessage, int, int, error) {
	var out map[string]json.RawMessage
	next, used, stopped := from, 0, false
	err := s.state.EachJob(ids[from:], func(i int, p *store.Job) bool {
		if len(p.Result) == 0 {
			next = from + i + 1
			return true
		}
		size := parentResultBytes(p.ID, p.Result)
		if len(out) >= limit || (used+size > maxBytes && !(atLeastOne && len(out) == 0)) {
			stopped = true
			return false
		}
		if out == nil {
			out = make(map[string]json.RawMessage)
		}
		out[p.ID] = p.Result
		used += size
		next = from + i + 1
		return true
	})
	if err == nil && !stopped {
		next = len(ids) // the ids after the last read name no job
	}
	return out, next, used, err
}

// parentResultBytes is what a parent's result takes in a reply's JSON
// object, `"id":result,`, counting the escapes encoding/json may write for
// < > & and U+2028/U+2029 (it writes each as 6 bytes).
func parentResultBytes(id string, r json.RawMessage) int {
	n := len(id) + len(r) + 4
	for i := 0; i < len(r); i++ {
		switch r[i] {
		case '<', '>', '&':
			n += 5
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(r) && r[i+1] == 0x80 && (r[i+2] == 0xA8 || r[i+2] == 0xA9) {
				n += 3
			}
		}
	}
	return n
}

// handleParentResults serves GET /jobs/{id}/parent_results?cursor=&limit=:
// a page of the job's parent results from cursor (the claim reply's
// parent_results_cursor, or a page's next_cursor; 0 by default), at most
// limit of them (1 to MaxDependencies, all by default) and
// wire.MaxParentResultsPageBytes.
func (s *Server) handleParentResults(w http.ResponseWriter, r *http.Request) {
	j, err := s.state.Job(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	from, limit := 0, MaxDependencies
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > len(j.DependsOn) {
			s.fail(w, r, invalid("cursor", "%q is not a cursor of this job's parent results", v))
			return
		}
		from = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxDependencies {
			s.fail(w, r, invalid("limit", "must be a number from 1 to %d, got %q", MaxDependencies, v))
			return
		}
		limit = n
	}
	res, next, _, err := s.parentResults(j.DependsOn, from, limit, wire.MaxParentResultsPageBytes, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.ParentResultsPage{ParentResults: res}
	if out.ParentResults == nil {
		out.ParentResults = map[string]json.RawMessage{}
	}
	if next < len(j.DependsOn) {
		out.NextCursor = strconv.Itoa(next)
	}
	writeJSON(w, http.StatusOK, out)
}
