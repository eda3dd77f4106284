package api

import (
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/cronspec"
	"github.com/workron/workron/store"
)

// handleCreateSchedule serves POST /schedules: 201, 409 if the name is taken.
func (s *Server) handleCreateSchedule(w http.ResponseWriter, r *http.Request) {
	var req wire.ScheduleRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	ps, err := s.newSchedule(&req, "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ps.Create = true
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: ps})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.logger.Info("schedule created", "schedule", ps.Name, "cron", ps.Cron, "timezone", ps.Timezone, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusCreated, s.toWireSchedule(res.Schedule))
}

// handleUpdateSchedule serves PUT /schedules/{name}: it replaces the
// definition and keeps the progress; 404 if there is no such schedule.
func (s *Server) handleUpdateSchedule(w http.ResponseWriter, r *http.Request) {
	var req wire.ScheduleRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	ps, err := s.newSchedule(&req, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: ps})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toWireSchedule(res.Schedule))
}

func (s *Server) handleListSchedules(w http.ResponseWriter, r *http.Request) {
	scheds, err := s.state.Schedules()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.ScheduleList{Schedules: make([]wire.Schedule, len(scheds))}
	for i, sc := range scheds {
		out.Schedules[i] = s.toWireSchedule(sc)
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
// outside the ticks (they go on as before). 201 with the job; 409 if the
// schedule skips overlapping runs and its previous run is unfinished.
func (s *Server) handleTriggerSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	tick := s.now()
	fire := &fsm.Fire{Name: name, Tick: tick, JobID: fsm.FireJobID(name, tick, true), Manual: true}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpFire, Fire: fire})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := res.Jobs[0]
	s.metrics.submitted.WithLabelValues(j.Queue).Inc()
	s.logger.Info("schedule triggered", "schedule", name, "job", j.ID, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusCreated, toWire(j, s.now()))
}

// toWireSchedule shows a stored schedule, with its next run as of now and
// the status of its latest job.
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
		from := now
		if last := time.Unix(0, sc.LastTick); last.After(from) {
			from = last
		}
		if next := spec.Next(from); !next.IsZero() {
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
	return out
}
