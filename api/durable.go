package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Sleeps, events and child jobs (issue #31): a running attempt parks its
// job on a step (POST /jobs/{id}/steps/{key}/sleep, /wait, /invoke: one
// fenced entry each, fsm/durable.go); POST /events and POST
// /jobs/{id}/signals/{name} send what waits wait for. The contract the
// SDKs code against is docs/api.md's "Sleeps, events and child jobs".

func init() {
	routeRoles["POST /jobs/{id}/steps/{key}/sleep"] = RoleWorker
	routeRoles["POST /jobs/{id}/steps/{key}/wait"] = RoleWorker
	routeRoles["POST /jobs/{id}/steps/{key}/invoke"] = RoleWorker
	// An invoke submits its child as POST /jobs would: a worker token
	// alone, which runs nothing by itself, may not.
	routeAlsoNeeds["POST /jobs/{id}/steps/{key}/invoke"] = alsoRole{RoleClient, "an invoke submits a job, as POST /jobs does"}
	routeRoles["POST /events"] = RoleClient
	routeRoles["POST /jobs/{id}/signals/{name}"] = RoleClient
}

// maxEventBodyBytes bounds the body of an event or a signal: a payload of
// fsm.MaxEventPayloadBytes and room for the rest.
const maxEventBodyBytes = fsm.MaxEventPayloadBytes + 4<<10

// maxParkMillis is fsm.MaxParkFor in milliseconds.
const maxParkMillis = fsm.MaxParkFor / int64(time.Millisecond)

// checkLease refuses a parking call without its attempt's lease.
func checkLease(lease uint64) error {
	if lease == 0 {
		return invalid("lease", "is required: the lease of the attempt that parks")
	}
	return nil
}

func (s *Server) handleSleepStep(w http.ResponseWriter, r *http.Request) {
	var req wire.SleepRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	cmd, err := sleepCmd(r.PathValue("id"), r.PathValue("key"), &req, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd.Token = s.fenceFields(r).token
	s.park(w, r, fsm.Cmd{Op: fsm.OpSleepStep, SleepStep: cmd})
}

// sleepCmd checks a sleep's body and makes its command.
func sleepCmd(jobID, key string, req *wire.SleepRequest, now time.Time) (*fsm.SleepStep, error) {
	if err := fsm.CheckStepKey(key); err != nil {
		return nil, err
	}
	if err := checkLease(req.Lease); err != nil {
		return nil, err
	}
	cmd := &fsm.SleepStep{JobID: jobID, Key: key, Lease: req.Lease}
	switch {
	case (req.Until == nil) == (req.DurationMillis == nil):
		return nil, invalid("until", "give until or duration_ms, one of the two")
	case req.DurationMillis != nil && (*req.DurationMillis < 0 || *req.DurationMillis > maxParkMillis):
		return nil, invalid("duration_ms", "must be from 0 to %d (365 days)", maxParkMillis)
	case req.DurationMillis != nil:
		cmd.For = *req.DurationMillis * int64(time.Millisecond)
	case req.Until.After(now.Add(time.Duration(fsm.MaxParkFor))):
		return nil, invalid("until", "is more than 365 days ahead")
	case !req.Until.After(time.Unix(0, 0)):
		return nil, invalid("until", "must be after 1970")
	default:
		cmd.Until = req.Until.UnixNano()
	}
	return cmd, nil
}

func (s *Server) handleWaitStep(w http.ResponseWriter, r *http.Request) {
	var req wire.WaitRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	cmd, err := waitCmd(r.PathValue("id"), r.PathValue("key"), &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd.Token = s.fenceFields(r).token
	s.park(w, r, fsm.Cmd{Op: fsm.OpWaitStep, WaitStep: cmd})
}

// waitCmd checks a wait's body and makes its command.
func waitCmd(jobID, key string, req *wire.WaitRequest) (*fsm.WaitStep, error) {
	if err := fsm.CheckStepKey(key); err != nil {
		return nil, err
	}
	if err := checkLease(req.Lease); err != nil {
		return nil, err
	}
	if req.TimeoutMillis < 0 || req.TimeoutMillis > maxParkMillis {
		return nil, invalid("timeout_ms", "must be from 0 (none) to %d (365 days)", maxParkMillis)
	}
	cmd := &fsm.WaitStep{JobID: jobID, Key: key, Lease: req.Lease, Event: req.Event, EventKey: req.Key,
		Signal: req.Signal, Timeout: req.TimeoutMillis * int64(time.Millisecond)}
	switch {
	case (req.Event == "") == (req.Signal == ""):
		return nil, invalid("event", "give event (with key) or signal, one of the two")
	case req.Signal != "" && req.Key != "":
		return nil, invalid("key", "a signal has no key: it goes to one job")
	}
	for _, c := range []struct{ field, v string }{{"event", req.Event}, {"key", req.Key}, {"signal", req.Signal}} {
		if err := fsm.CheckEventName(c.field, c.v, true); err != nil {
			return nil, err
		}
	}
	return cmd, nil
}

func (s *Server) handleInvokeStep(w http.ResponseWriter, r *http.Request) {
	var req wire.InvokeRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	key := r.PathValue("key")
	if err := fsm.CheckStepKey(key); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkLease(req.Lease); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Job.GangSize != 0 {
		s.fail(w, r, invalid("job.gang_size", "a child job is one job, not a gang"))
		return
	}
	nj, err := s.oneJob(r, &req.Job, fieldIn("job."))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd := &fsm.InvokeStep{JobID: r.PathValue("id"), Key: key, Lease: req.Lease, Child: nj, Token: s.fenceFields(r).token}
	s.park(w, r, fsm.Cmd{Op: fsm.OpInvokeStep, InvokeStep: cmd})
}

// park proposes a parking command and answers 201 {step, parked}, or 409
// step_recorded with the step recorded before.
func (s *Server) park(w http.ResponseWriter, r *http.Request, cmd fsm.Cmd) {
	res, err := s.propose(r.Context(), cmd)
	if errors.Is(err, fsm.ErrStepRecorded) && res.Step != nil {
		code, msg := reply(err)
		writeJSON(w, statusOf(code), wire.StepRecorded{Error: msg, Code: code, Step: new(stepWire(res.Step))})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if cmd.Op == fsm.OpInvokeStep && len(res.Jobs) > 1 {
		s.jobsSubmitted(r.Context(), res.Jobs[1:])
	}
	s.metrics.steps.parking(res.Step, res.Parked)
	writeJSON(w, http.StatusCreated, wire.ParkReply{Step: stepWire(res.Step), Parked: res.Parked})
}

func (s *Server) handleSendEvent(w http.ResponseWriter, r *http.Request) {
	var req wire.EventRequest
	if err := decodeBody(w, r, maxEventBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := fsm.CheckEventName("name", req.Name, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := fsm.CheckEventName("key", req.Key, true); err != nil {
		s.fail(w, r, err)
		return
	}
	s.send(w, r, &fsm.SendEvent{Name: req.Name, Key: req.Key}, req.Payload)
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	var req wire.SignalRequest
	if err := decodeBody(w, r, maxEventBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := fsm.CheckEventName("name", name, false); err != nil {
		s.fail(w, r, err)
		return
	}
	s.send(w, r, &fsm.SendEvent{Name: name, Signal: true, JobID: r.PathValue("id")}, req.Payload)
}

// send proposes an event or a signal with its payload: 202 {seq, woke}.
func (s *Server) send(w http.ResponseWriter, r *http.Request, e *fsm.SendEvent, payload json.RawMessage) {
	if len(payload) > fsm.MaxEventPayloadBytes {
		s.fail(w, r, &badRequest{field: "payload", reason: "is more than max_event_payload_bytes = 65536", tooBig: true})
		return
	}
	if len(payload) > 0 && string(payload) != "null" {
		e.Payload = payload
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpSendEvent, SendEvent: e})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, wire.EventReply{Seq: res.Seq, Woke: res.Woke})
}

// parkedWire is what GET /jobs/{id} shows of a parked job.
func parkedWire(p *store.Park) *wire.Parked {
	out := &wire.Parked{Kind: p.Kind, Step: p.Step, ChildID: p.ChildID}
	if p.WakeAt != 0 {
		out.WakeAt = new(time.Unix(0, p.WakeAt).UTC())
	}
	if c := p.Chan; c != nil {
		if c.Signal {
			out.Signal = c.Name
		} else {
			out.Event, out.EventKey = c.Name, c.Key
		}
	}
	return out
}
