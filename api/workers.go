package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// handleRegister records a worker and what it offers (POST
// /workers/register); registering again updates it. A new id beyond the
// token's cap (Config.MaxWorkersPerToken) first frees one of the token's
// ids whose worker went silent, and is refused (429 too_many_workers) if
// none has.
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	var req wire.Worker
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkWorker(&req); err != nil {
		s.fail(w, r, err)
		return
	}
	reg := &fsm.Register{Worker: store.Worker{
		ID: req.ID, ExecAddr: req.ExecAddr, VRAMMB: req.Resources.VRAMMB, MemoryMB: req.Resources.MemoryMB,
		CPUMillis: req.Resources.CPUMillis, Slots: req.Resources.Slots, Tags: req.Tags, Queues: req.Queues,
	}}
	s.fenceFields(r).register(reg)
	s.releaseSilentID(r.Context(), reg.Worker.ID, reg.Token)
	// Past the cap, refuse here unless a silent id can make room: a flood
	// of registrations that would be refused never reaches the log.
	var tw *fsm.TooManyWorkersError
	if err := s.state.AdmitWorker(reg.Worker.ID, reg.Token, reg.MaxWorkers); errors.As(err, &tw) && !s.releaseSilentWorker(r.Context(), tw.Owner) {
		s.fail(w, r, err)
		return
	}
	cmd := fsm.Cmd{Op: fsm.OpRegister, Register: reg}
	res, err := s.propose(r.Context(), cmd)
	if errors.As(err, &tw) && s.releaseSilentWorker(r.Context(), tw.Owner) {
		res, err = s.propose(r.Context(), cmd) // a silent id made room
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.workerWire(res.Worker, 0))
}

// handleWorkerHeartbeat renews the leases of a worker's jobs (POST
// /workers/{id}/heartbeat) and answers what each must do.
func (s *Server) handleWorkerHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req wire.WorkerHeartbeatRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Jobs) > MaxHeartbeatJobs {
		s.fail(w, r, invalid("jobs", "more than %d leases", MaxHeartbeatJobs))
		return
	}
	if req.ClaimsFrom > req.ClaimsTo {
		s.fail(w, r, invalid("claims_from", "must not be above claims_to"))
		return
	}
	hb := &fsm.WorkerHeartbeat{WorkerID: r.PathValue("id"), LeaseTTL: int64(s.cfg.LeaseTTL)}
	s.fenceFields(r).workerHeartbeat(hb, req.ClaimsFrom, req.ClaimsTo)
	if req.Jobs != nil { // listed, even if empty: only these are renewed
		hb.Listed = true
		for i, l := range req.Jobs {
			p, err := checkProgress(func(s string) string { return fmt.Sprintf("jobs[%d].%s", i, s) }, l.Progress)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			hb.Leases = append(hb.Leases, fsm.LeaseRef{JobID: l.JobID, Lease: l.Lease, Progress: p})
		}
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: hb})
	if !errors.Is(err, fsm.ErrForbidden) {
		s.live.Heard(hb.WorkerID, time.Now()) // heard from, unless from another token
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, j := range res.Jobs {
		s.logJob(r.Context(), slog.LevelWarn, "claim reply lost: job given back, attempt not counted", j, "heartbeat_of", hb.WorkerID)
	}
	out := wire.WorkerHeartbeatResponse{Renewed: res.Renewed, LeaseExpiresAt: optTime(res.Deadline)}
	for _, a := range res.Actions {
		out.Actions = append(out.Actions, wire.JobAction{JobID: a.JobID, Lease: a.Lease, Action: a.Action, PreemptionEpoch: a.Epoch})
	}
	for _, l := range res.Lost {
		code, _ := reply(l.Reason)
		out.Lost = append(out.Lost, wire.LostLease{JobID: l.JobID, Lease: l.Lease, Reason: code})
	}
	writeJSON(w, http.StatusOK, out)
}

// Worker list limits: GET /workers answers a page of at most
// MaxWorkerListLimit workers (DefaultWorkerListLimit without limit), with
// a next_cursor while more follow.
const (
	DefaultWorkerListLimit = DefaultPageLimit
	MaxWorkerListLimit     = MaxPageLimit
)

// handleWorkers lists the registered workers (GET
// /workers?limit=&cursor=), a page at a time in id order.
func (s *Server) handleWorkers(w http.ResponseWriter, r *http.Request) {
	limit, after, err := pageQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	workers, more, err := s.state.WorkerPage(after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ids := make([]string, len(workers))
	for i, wk := range workers {
		ids[i] = wk.ID
	}
	running := s.state.RunningOf(ids)
	out := wire.WorkerList{Workers: make([]wire.Worker, 0, len(workers))}
	for i, wk := range workers {
		out.Workers = append(out.Workers, s.workerWire(wk, running[i]))
	}
	if more {
		out.NextCursor = nextCursor(ids[len(ids)-1])
	}
	writeJSON(w, http.StatusOK, out)
}

// handleDeleteWorker forgets a worker (DELETE /workers/{id}): 204, and GET
// /workers no longer lists it. Only a worker this node (the leader) counts
// as offline, holding no lease or gang reservation, may be forgotten; 409
// otherwise, 404 for an unknown worker. A forgotten worker that comes back
// registers again as a new one.
func (s *Server) handleDeleteWorker(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wk, err := s.state.Worker(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.live.Active(wk, s.cfg.Now()) {
		s.fail(w, r, fmt.Errorf("worker %s is active (last heard from %s); stop it first, or wait until it counts as offline: %w",
			id, s.live.LastSeen(wk).UTC().Format(time.RFC3339), fsm.ErrConflict))
		return
	}
	cmd := fsm.Cmd{Op: fsm.OpForgetWorker, ForgetWorker: &fsm.ForgetWorker{WorkerID: id, SeenAt: wk.LastHeartbeat}}
	if _, err := s.propose(r.Context(), cmd); err != nil {
		s.fail(w, r, err)
		return
	}
	s.live.Forget(id)
	s.logger.Info("worker forgotten", "worker", id, "request_id", requestID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}

// workerWire shows a worker, active unless silent for the liveness
// tracker's OfflineAfter.
func (s *Server) workerWire(w *store.Worker, running int) wire.Worker {
	seen := s.live.LastSeen(w)
	status := "active"
	if s.cfg.Now().Sub(seen) > s.live.OfflineAfter() {
		status = "offline"
	}
	return wire.Worker{
		ID: w.ID, ExecAddr: w.ExecAddr, Tags: w.Tags, Queues: w.Queues, Status: status,
		Resources:     wire.Resources{VRAMMB: w.VRAMMB, MemoryMB: w.MemoryMB, CPUMillis: w.CPUMillis, Slots: w.Slots},
		LastHeartbeat: seen.UTC(), RegisteredAt: time.Unix(0, w.RegisteredAt).UTC(),
		RunningJobs: running,
	}
}

// activeWorkers lists the workers active at now, by id, from the FSM's
// copy of their records: none is decoded.
func (s *Server) activeWorkers(now time.Time) []*store.Worker {
	return s.state.WorkersWhere(func(w *store.Worker) bool { return s.live.Active(w, now) })
}
