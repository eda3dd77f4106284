package api

// Bulk actions (issue #30): POST /bulk starts one for every job a selector
// matches, GET /bulk and GET /bulk/{id} show their progress, POST
// /bulk/{id}/stop stops one. The FSM applies them in chunks (fsm/bulk.go)
// that the leader's bulk loop proposes (leader/bulk.go), walking the jobs
// CompileSelector matches. (The routes are /bulk, not /jobs/bulk: the
// latter's GET /jobs/bulk/{id} would overlap GET /jobs/{id}/parent_results.)

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// MaxBulkCountScan is the most jobs a dry run reads to count a selector
// that an index alone does not answer; beyond it the count is not exact.
const MaxBulkCountScan = 1_000_000

// CompileSelector turns a bulk action's selector text into the query its
// walk reads (the status index and the search index's terms the selector
// allows, and the test each job must pass: nil for every one), as of now
// (Unix nanoseconds). The text is a query string of the
// conditions of GET /jobs (filter=, the jobfilter language; status=,
// queue=, metadata.K=), as selectorText writes it, read by the same
// jobQuery and storeQuery as a list: a bulk action acts on what the same
// filter lists. The API checks a request with it and the leader's bulk
// loop walks with it (node hands it to leader.BulkerConfig.Compile).
func CompileSelector(text string, now int64) (store.ListQuery, error) {
	q, err := url.ParseQuery(text)
	if err != nil {
		return store.ListQuery{}, invalid("selector", "%v", err)
	}
	for k := range q {
		if k != "status" && k != "queue" && k != "filter" && !strings.HasPrefix(k, "metadata.") {
			return store.ListQuery{}, invalid(k, "is not a filter of a bulk action")
		}
	}
	f, err := jobQuery(q, now)
	if err != nil {
		return store.ListQuery{}, err
	}
	return storeQuery(f, store.ListQuery{}), nil
}

// selectorText is the canonical text of a request's filters (keys sorted).
func selectorText(req *wire.BulkRequest) string {
	q := url.Values{}
	if req.Status != "" {
		q.Set("status", req.Status)
	}
	if req.Queue != "" {
		q.Set("queue", req.Queue)
	}
	for k, v := range req.Metadata {
		q.Set("metadata."+k, v)
	}
	if req.Filter != "" {
		q.Set("filter", req.Filter)
	}
	return q.Encode()
}

// checkBulk validates a bulk request's fields, naming the first bad one.
func checkBulk(req *wire.BulkRequest) error {
	switch req.Action {
	case wire.BulkCancel, wire.BulkRetry, wire.BulkDelete:
		if req.Priority != nil {
			return invalid("priority", "is only for the priority action")
		}
	case wire.BulkPriority:
		if req.Priority == nil {
			return invalid("priority", "is required by the priority action")
		}
		if *req.Priority > MaxPriority || *req.Priority < -MaxPriority {
			return invalid("priority", "must be within ±%d, got %d", MaxPriority, *req.Priority)
		}
	default:
		return invalid("action", "must be cancel, retry, delete or priority, got %.40q", req.Action)
	}
	if req.Status == "" && req.Queue == "" && len(req.Metadata) == 0 && req.Filter == "" {
		return invalid("status", "a bulk action needs at least one filter (status, queue, metadata or filter)")
	}
	if req.Queue != "" {
		if err := validName("queue", req.Queue); err != nil {
			return err
		}
	}
	if len(req.Metadata) > MaxListFilters {
		return invalid("metadata", "more than %d metadata filters", MaxListFilters)
	}
	return checkMap(func(s string) string { return s }, "metadata", req.Metadata)
}

// handleBulkCreate serves POST /bulk.
func (s *Server) handleBulkCreate(w http.ResponseWriter, r *http.Request) {
	var req wire.BulkRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkBulk(&req); err != nil {
		s.fail(w, r, err)
		return
	}
	text := selectorText(&req)
	if len(text) > fsm.MaxBulkSelector {
		s.fail(w, r, invalid("metadata", "the filters take more than %d bytes", fsm.MaxBulkSelector))
		return
	}
	q, err := CompileSelector(text, s.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.DryRun {
		n, exact, _, err := s.state.CountJobs(q, MaxBulkCountScan)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, wire.BulkCount{Matched: int64(n), Exact: exact})
		return
	}
	start := &fsm.BulkStart{Action: req.Action, Selector: text, Status: q.Status}
	if req.Priority != nil {
		start.Priority = *req.Priority
	}
	s.bulkCommand(w, r, http.StatusCreated, fsm.Cmd{Op: fsm.OpBulkStart, BulkStart: start})
}

// bulkCommand proposes a bulk action's command and answers with the
// action after it.
func (s *Server) bulkCommand(w http.ResponseWriter, r *http.Request, status int, cmd fsm.Cmd) {
	res, err := s.propose(r.Context(), cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, status, toWireBulk(res.Bulk))
}

// bulkID reads the {id} of a bulk route; a bad one is not found.
func bulkID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, fsm.ErrBulkNotFound
	}
	return id, nil
}

// handleBulkGet serves GET /bulk/{id}.
func (s *Server) handleBulkGet(w http.ResponseWriter, r *http.Request) {
	id, err := bulkID(r)
	if err == nil {
		var b *store.Bulk
		if b, err = s.state.Bulk(id); err == nil {
			writeJSON(w, http.StatusOK, toWireBulk(b))
			return
		}
	}
	s.fail(w, r, err)
}

// handleBulkList serves GET /bulk: every action kept, newest first.
func (s *Server) handleBulkList(w http.ResponseWriter, r *http.Request) {
	bs := s.state.Bulks()
	out := wire.BulkList{Bulks: make([]wire.Bulk, 0, len(bs))}
	for _, b := range slices.Backward(bs) {
		out.Bulks = append(out.Bulks, toWireBulk(b))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleBulkStop serves POST /bulk/{id}/stop.
func (s *Server) handleBulkStop(w http.ResponseWriter, r *http.Request) {
	id, err := bulkID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := s.state.Bulk(id); err != nil {
		s.fail(w, r, err) // a mistyped id costs no log entry
		return
	}
	s.bulkCommand(w, r, http.StatusOK, fsm.Cmd{Op: fsm.OpBulkStop, BulkStop: &fsm.BulkStop{ID: id}})
}

// toWireBulk is a bulk action as the API shows it.
func toWireBulk(b *store.Bulk) wire.Bulk {
	out := wire.Bulk{
		ID: strconv.FormatUint(b.ID, 10), Action: b.Action, Selector: b.Selector, State: string(b.State),
		Matched: b.Matched, Done: b.Done, Failed: b.Failed, Skipped: b.Skipped, LastError: b.LastError,
		CreatedAt: time.Unix(0, b.Created).UTC(), UpdatedAt: time.Unix(0, b.Updated).UTC(),
	}
	if b.Action == fsm.BulkPriority {
		p := b.Priority
		out.Priority = &p
	}
	return out
}
