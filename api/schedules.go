package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/cronspec"
	"github.com/workron/workron/store"
)

// maxSchedules is the cap a create carries (fsm.MaxSchedules); a var so
// that tests can lower it.
var maxSchedules = fsm.MaxSchedules

// handleCreateSchedule serves POST /schedules: 201, 409 if the name is taken.
func (s *Server) handleCreateSchedule(w http.ResponseWriter, r *http.Request) {
	var req wire.ScheduleRequest
	warnings, err := decodeBodyWarn(w, r, s.cfg.MaxBodyBytes, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ps, err := s.newSchedule(&req, "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ps.Create = true
	if s.node.AwaitProtocol(r.Context()) >= fsm.ProtocolScheduleCap {
		ps.MaxSchedules = maxSchedules
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: ps})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.logger.Info("schedule created", "schedule", ps.Name, "cron", ps.Cron, "timezone", ps.Timezone, "request_id", requestID(r.Context()))
	out := s.toWireSchedule(res.Schedule)
	out.Warnings = warnings
	writeJSON(w, http.StatusCreated, out)
}

// handleUpdateSchedule serves PUT /schedules/{name}: it changes only the
// fields the body names and keeps the others, paused and overlap included,
// and the progress; 404 if there is no such schedule. The body is laid
// over the schedule as GET shows it: a top-level field or a field of "job"
// that is present replaces the current value whole (env and metadata
// included: they are not merged key by key); an empty "cron" keeps the
// current one. Two updates at once each apply their fields on top of what
// they read, the later one last.
func (s *Server) handleUpdateSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cur, err := s.state.Schedule(name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, warnings, err := mergeSchedule(s.toWireSchedule(cur), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ps, err := s.newSchedule(&req, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: ps})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := s.toWireSchedule(res.Schedule)
	out.Warnings = warnings
	writeJSON(w, http.StatusOK, out)
}

// mergeSchedule lays a PUT body over the current schedule and returns the
// whole definition, with warnings for unknown fields.
func mergeSchedule(cur wire.Schedule, body []byte) (wire.ScheduleRequest, []string, error) {
	req := wire.ScheduleRequest{Name: cur.Name, Cron: cur.Cron, Timezone: cur.Timezone, Job: cur.Job,
		Overlap: cur.Overlap, Catchup: cur.Catchup, Paused: cur.Paused}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil, nil
	}
	if err := checkBody(body, reflect.TypeFor[wire.ScheduleRequest](), 0); err != nil {
		return req, nil, err
	}
	var fields struct {
		Job map[string]json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal(body, &fields); err != nil {
		return req, nil, jsonError(err)
	}
	// A field named in "job" replaces the template's value whole: clear
	// the maps (json would merge into them) and pointers it names.
	for k := range fields.Job {
		switch strings.ToLower(k) {
		case "env":
			req.Job.Env = nil
		case "metadata":
			req.Job.Metadata = nil
		case "max_attempts":
			req.Job.MaxAttempts = nil
		case "max_retries":
			req.Job.MaxAttempts = nil // the other spelling of the same limit
		case "backoff":
			req.Job.Backoff = nil
		case "resources":
			req.Job.Resources = nil
		}
	}
	keepCron := req.Cron
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, jsonError(err)
	}
	if strings.TrimSpace(req.Cron) == "" {
		req.Cron = keepCron
	}
	if req.Job.Type != "" && fields.Job["command"] == nil && fields.Job["type"] != nil {
		req.Job.Command = "" // switching to a typed job drops the command
	}
	if req.Job.Command != "" && fields.Job["type"] == nil && fields.Job["command"] != nil {
		req.Job.Type = "" // and back
	}
	if req.Job.Type == "" || string(req.Job.Payload) == "null" {
		req.Job.Payload = nil // a payload goes with a type; null clears it
	}
	return req, unknownFields(body, reflect.TypeFor[wire.ScheduleRequest](), ""), nil
}

// handleListSchedules lists the schedules (GET
// /schedules?limit=&cursor=), a page at a time in name order.
func (s *Server) handleListSchedules(w http.ResponseWriter, r *http.Request) {
	limit, after, err := pageQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	scheds, more, err := s.state.SchedulePage(after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.ScheduleList{Schedules: make([]wire.Schedule, len(scheds))}
	for i, sc := range scheds {
		out.Schedules[i] = s.toWireSchedule(sc)
	}
	if more {
		out.NextCursor = nextCursor(scheds[len(scheds)-1].Name)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.state.Schedule(r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toWireSchedule(sc))
}

// handleDeleteSchedule serves DELETE /schedules/{name}: 204; the jobs the
// schedule created stay.
func (s *Server) handleDeleteSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpDeleteSchedule, DeleteSchedule: &fsm.DeleteSchedule{Name: name}}); err != nil {
		s.fail(w, r, err)
		return
	}
	s.logger.Info("schedule deleted", "schedule", name, "request_id", requestID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.pauseSchedule(w, r, true)
}

func (s *Server) handleResumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.pauseSchedule(w, r, false)
}

func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request, paused bool) {
	cmd := fsm.Cmd{Op: fsm.OpPauseSchedule, PauseSchedule: &fsm.PauseSchedule{Name: r.PathValue("name"), Paused: paused}}
	res, err := s.propose(r.Context(), cmd)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toWireSchedule(res.Schedule))
}

// handleTriggerSchedule serves POST /schedules/{name}/trigger: one run now,
// outside the ticks (they go on as before), in the request's trace as a
// submitted job is (jobTrace). 201 with the job; 409 if the
// schedule skips overlapping runs and its previous run is unfinished.
func (s *Server) handleTriggerSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	tick := s.now()
	fire := &fsm.Fire{Name: name, Tick: tick, JobID: fsm.FireJobID(name, tick, true), Manual: true, TraceParent: s.jobTrace(r)}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpFire, Fire: fire})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := res.Jobs[0]
	traceJobs(r.Context(), j)
	s.metrics.submitted.of(j.Queue).Inc()
	s.logger.Info("schedule triggered", "schedule", name, "job", j.ID, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusCreated, toWire(j, s.now()))
}

// toWireSchedule shows a stored schedule, with its next run (the tick the
// scheduler fires next, counted from the last one) and the status of its
// latest job.
func (s *Server) toWireSchedule(sc *store.Schedule) wire.Schedule {
	now := s.cfg.Now()
	out := wire.Schedule{
		Name:      sc.Name,
		Cron:      sc.Cron,
		Timezone:  sc.Timezone,
		Overlap:   sc.Overlap,
		Catchup:   sc.Catchup,
		Paused:    sc.Paused,
		CreatedAt: time.Unix(0, sc.CreatedAt).UTC(),
		UpdatedAt: time.Unix(0, sc.UpdatedAt).UTC(),
		LastTick:  optTime(sc.LastTick),
		LastRun:   optTime(sc.LastRun),
		LastJobID: sc.LastJobID,
		LastError: sc.LastError,
		Runs:      sc.Runs,
		Skipped:   sc.Skipped,
		Missed:    sc.Missed,
	}
	if nj, err := fsm.ScheduleJob(sc); err == nil {
		out.Job = toSubmitRequest(&nj)
	}
	if spec, err := cronspec.Parse(sc.Cron, sc.Timezone); err == nil && !sc.Paused {
		if next := cronspec.NextRun(spec, time.Unix(0, sc.LastTick), now); !next.IsZero() {
			t := next.UTC()
			out.NextRun = &t
		}
	}
	if sc.LastJobID != "" {
		if j, err := s.state.Job(sc.LastJobID); err == nil {
			out.LastJobStatus = toWire(j, now.UnixNano()).Status
		}
	}
	return out
}

// toSubmitRequest shows a job template the way it would be submitted.
func toSubmitRequest(nj *fsm.NewJob) wire.SubmitRequest {
	maxAtt := nj.MaxAttempts
	out := wire.SubmitRequest{
		Command:     nj.Command,
		Type:        nj.Type,
		Payload:     nj.Payload,
		Env:         nj.Env,
		Metadata:    nj.Metadata,
		Queue:       nj.Queue,
		Priority:    nj.Priority,
		MaxAttempts: &maxAtt,
	}
	if nj.Timeout > 0 {
		out.Timeout = time.Duration(nj.Timeout).String()
	}
	if nj.Backoff != DefaultBackoff {
		out.Backoff = &wire.Backoff{Base: time.Duration(nj.Backoff.Base).String(), Max: time.Duration(nj.Backoff.Max).String(), Jitter: nj.Backoff.Jitter}
	}
	if nj.Retention > 0 {
		out.Retention = time.Duration(nj.Retention).String()
	}
	if !nj.Resources.IsZero() {
		out.Resources = resourcesWire(nj.Resources)
	}
	out.Tags = nj.Tags
	return out
}
