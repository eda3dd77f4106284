package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Durable steps (issue #31): a running attempt records each step of its
// job's journal with PUT /jobs/{id}/steps/{key} (one fenced write through
// Raft, fsm.OpRecordStep), and reads what earlier attempts recorded with
// GET /jobs/{id}/steps and GET /jobs/{id}/steps/{key}. A claim reply and
// GET /jobs/{id} say which steps are recorded, bounded (withJournals);
// results are fetched when a step asks, or with the listing
// (?results=1, pages bounded by bytes) by an attempt whose claim listed
// only part of the journal.

func init() {
	// Who may call the step routes when tokens are required (see
	// auth.go): the worker that runs the attempt records; a journal is
	// read by its workers and by clients (GET /jobs/{id} shows it too).
	routeRoles["PUT /jobs/{id}/steps/{key}"] = RoleWorker
	routeRoles["GET /jobs/{id}/steps"] = routeAny
	routeRoles["GET /jobs/{id}/steps/{key}"] = routeAny
}

// maxStepBodyBytes bounds the body of a PUT of a step: a result of
// fsm.MaxStepResultBytes and room for the rest.
const maxStepBodyBytes = fsm.MaxStepResultBytes + 4<<10

// handlePutStep records one step of the caller's attempt: 201 with the
// step, 409 step_recorded with the step recorded before.
func (s *Server) handlePutStep(w http.ResponseWriter, r *http.Request) {
	var req wire.StepRequest
	if err := decodeBody(w, r, maxStepBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := stepRecord(r.PathValue("id"), r.PathValue("key"), &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if fc := s.fenceFields(r); fc.on {
		rec.Token = fc.token
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpRecordStep, RecordStep: rec})
	if errors.Is(err, fsm.ErrStepRecorded) && res.Step != nil {
		code, msg := reply(err)
		writeJSON(w, statusOf(code), wire.StepRecorded{Error: msg, Code: code, Step: new(stepWire(res.Step))})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.steps.stepRecorded(res.Step)
	writeJSON(w, http.StatusCreated, stepWire(res.Step))
}

// stepRecord checks a PUT of a step and makes its command.
func stepRecord(jobID, key string, req *wire.StepRequest) (*fsm.RecordStep, error) {
	if err := fsm.CheckStepKey(key); err != nil {
		return nil, err
	}
	rec := &fsm.RecordStep{JobID: jobID, Key: key, Lease: req.Lease, Attempts: req.Attempts}
	switch req.Status {
	case "", wire.StepOK:
	case wire.StepFailed:
		rec.Failed = true
	default:
		return nil, invalid("status", "must be %q or %q, got %q", wire.StepOK, wire.StepFailed, req.Status)
	}
	switch {
	case req.Lease == 0:
		return nil, invalid("lease", "is required: the lease of the attempt that ran the step")
	case req.Attempts < 0 || req.Attempts > fsm.MaxStepAttempts:
		return nil, invalid("attempts", "must be from 1 to %d", fsm.MaxStepAttempts)
	case req.DurationMillis < 0 || req.DurationMillis > int64(time.Duration(1<<62)/time.Millisecond):
		return nil, invalid("duration_ms", "must be a number of milliseconds from 0")
	case len(req.Result) > fsm.MaxStepResultBytes:
		return nil, &badRequest{field: "result", reason: fmt.Sprintf("is %d bytes, more than max_step_result_bytes = %d", len(req.Result), fsm.MaxStepResultBytes), tooBig: true}
	}
	rec.Duration = req.DurationMillis * int64(time.Millisecond)
	if len(req.Result) > 0 && string(req.Result) != "null" {
		rec.Result = req.Result
	}
	return rec, nil
}

// handleListSteps lists a job's journal by pages, in key order, without
// results; with ?results=1, with them, a page then also bounded by
// wire.MaxStepPageResultBytes of results (at least one step), so that a
// resuming attempt reads its journal in a few pages, not a GET per step.
func (s *Server) handleListSteps(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, after, err := pageQuery(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	results, err := resultsQuery(q.Get("results"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var (
		steps []*store.Step
		more  bool
		tot   store.JournalTotals
	)
	if results {
		steps, more, tot, err = s.state.StepsWithResults(r.PathValue("id"), after, limit, wire.MaxStepPageResultBytes)
	} else {
		steps, tot, err = s.state.Steps(r.PathValue("id"), after, limit+1)
		if more = len(steps) > limit; more {
			steps = steps[:limit]
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.StepList{Steps: make([]wire.Step, 0, len(steps)), Count: tot.Steps, Bytes: tot.Bytes}
	for _, st := range steps {
		out.Steps = append(out.Steps, stepWire(st))
	}
	if more && len(steps) > 0 {
		out.NextCursor = nextCursor(steps[len(steps)-1].Key)
	}
	writeJSON(w, http.StatusOK, out)
}

// resultsQuery reads GET /jobs/{id}/steps?results=: "1" or "true" lists
// the results, "", "0" or "false" does not.
func resultsQuery(v string) (bool, error) {
	switch v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, invalid("results", "must be 1 or 0 (true or false), got %q", v)
}

// handleGetStep answers one recorded step with its result.
func (s *Server) handleGetStep(w http.ResponseWriter, r *http.Request) {
	st, err := s.state.Step(r.PathValue("id"), r.PathValue("key"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, stepWire(st))
}

// stepWire is a stored step as replies show it; Result is set when st
// carries it.
func stepWire(st *store.Step) wire.Step {
	out := wire.Step{Key: st.Key, Status: st.Status, Attempts: st.Attempts, JobAttempt: st.Attempt,
		RecordedAt: time.Unix(0, st.RecordedAt).UTC(), DurationMillis: st.Duration / int64(time.Millisecond), Size: st.Size}
	if st.Result != nil {
		out.Result = json.RawMessage(st.Result)
	}
	out.Kind, out.Event, out.EventKey, out.Signal, out.ChildID = st.Kind, st.Event, st.EventKey, st.Signal, st.ChildID
	if st.WakeAt != 0 {
		out.WakeAt = new(time.Unix(0, st.WakeAt).UTC())
	}
	return out
}

// withJournals gives each job of jobs that has recorded steps its
// journal: the totals and the first steps in key order, at most perJob
// each and total in all; a journal that lists fewer than it holds is
// Truncated. A claim's reply stays small however long the journals.
func (s *Server) withJournals(jobs []wire.Job, perJob, total int) {
	for i := range jobs {
		j := &jobs[i]
		steps, tot, err := s.state.Steps(j.ID, "", max(min(perJob, total), 1))
		if err != nil {
			s.logger.Warn("read journal", "job_id", j.ID, "err", err)
			continue
		}
		if tot.Steps == 0 {
			continue
		}
		jr := &wire.Journal{Count: tot.Steps, Bytes: tot.Bytes}
		if total > 0 {
			jr.Steps = make([]wire.Step, len(steps))
			for k, st := range steps {
				jr.Steps[k] = stepWire(st)
			}
			total -= len(steps)
		}
		jr.Truncated = len(jr.Steps) < tot.Steps
		j.Journal = jr
	}
}
