package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// claimRetryPause is how long a long-poll waits after a claim came back
// empty although a job looked ready (another worker got it first).
const claimRetryPause = 5 * time.Millisecond

// claimArgs is a validated claim.
type claimArgs struct {
	cmd  fsm.Claim
	wait time.Duration
	// anyQueue (the seed's /jobs/next without a queue) re-lists the queues
	// on every wake-up, so a queue created during the wait is seen.
	anyQueue bool
}

// claim leases jobs to a worker, waiting up to wait for one to be ready. An
// idle wait proposes nothing: it sleeps on the state machine's change signal
// (and the next delayed job's due time) and proposes a claim only when the
// state holds a job this worker could take.
func (s *Server) claim(ctx context.Context, a claimArgs) ([]*store.Job, error) {
	s.lastPoll.Store(a.cmd.WorkerID, time.Now())
	defer s.lastPoll.Store(a.cmd.WorkerID, time.Now())
	deadline := time.Now().Add(a.wait)
	for {
		changed := s.state.Changed()
		if a.anyQueue {
			a.cmd.Queues = s.allQueues()
		}
		finished := s.claimsFinished()
		ready := s.state.ClaimableCount(a.cmd.WorkerID, a.cmd.Queues, a.cmd.Types, a.cmd.Shell, s.now())
		if ready > 0 && s.claiming.acquire(ready) {
			res, err := s.propose(ctx, fsm.Cmd{Op: fsm.OpClaim, Claim: &a.cmd})
			s.claiming.release()
			if err != nil {
				return nil, err
			}
			if len(res.Jobs) > 0 {
				s.jobsClaimed(ctx, res.Jobs)
				return res.Jobs, nil
			}
			changed = nil // lost a race: pause briefly rather than spin
		}
		left := time.Until(deadline)
		if left <= 0 || !s.node.IsLeader() || s.isDraining() {
			return nil, nil
		}
		timer := time.NewTimer(min(left, s.untilNextDue(changed == nil)))
		select {
		case <-s.draining:
			timer.Stop()
			return nil, nil
		case <-changed:
		case <-finished: // a claim in flight ended: the jobs it left may be ours
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, nil
		}
		timer.Stop()
	}
}

// claimGate keeps the long-polls of one leader from sending many more
// claims than there are jobs: when a job arrives every parked worker wakes,
// but only as many claims as there are claimable jobs go out at once; the
// others wait for one of them to finish, then look again.
type claimGate struct {
	inflight atomic.Int64
	mu       sync.Mutex
	done     chan struct{} // closed when a claim in flight finishes
}

// acquire takes a slot if fewer than ready claims are in flight.
func (g *claimGate) acquire(ready int) bool {
	for {
		n := g.inflight.Load()
		if n >= int64(ready) {
			return false
		}
		if g.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release frees a slot and wakes the polls waiting for one.
func (g *claimGate) release() {
	g.inflight.Add(-1)
	g.mu.Lock()
	if g.done != nil {
		close(g.done)
		g.done = nil
	}
	g.mu.Unlock()
}

// claimsFinished returns a channel closed when the next claim in flight
// finishes.
func (s *Server) claimsFinished() <-chan struct{} {
	g := &s.claiming
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
	}
	return g.done
}

// untilNextDue is how long to sleep before the next delayed job is due.
func (s *Server) untilNextDue(lostRace bool) time.Duration {
	if lostRace {
		return claimRetryPause
	}
	d := time.Second // re-check leadership now and then
	if due := s.state.NextDue(); due != 0 {
		d = min(d, max(time.Duration(due-s.now()), time.Millisecond))
	}
	return d
}

func (s *Server) claimArgs(req *wire.ClaimRequest) (claimArgs, error) {
	if req.WorkerID == "" {
		return claimArgs{}, invalid("worker_id", "must not be empty")
	}
	if len(req.WorkerID) > MaxKeyBytes {
		return claimArgs{}, invalid("worker_id", "longer than %d bytes", MaxKeyBytes)
	}
	if len(req.Queues) > MaxQueues {
		return claimArgs{}, invalid("queues", "more than %d queues", MaxQueues)
	}
	if len(req.Types) > MaxTypes {
		return claimArgs{}, invalid("types", "more than %d types", MaxTypes)
	}
	for _, q := range req.Queues {
		if err := validName("queues", q); err != nil {
			return claimArgs{}, err
		}
	}
	for _, t := range req.Types {
		if err := validName("types", t); err != nil {
			return claimArgs{}, err
		}
	}
	if req.Max < 0 || req.Max > fsm.MaxClaim {
		return claimArgs{}, invalid("max", "must be between 1 and %d, got %d", fsm.MaxClaim, req.Max)
	}
	var wait time.Duration
	if req.Wait != "" {
		d, err := wire.ParseDuration("wait", req.Wait)
		if err != nil {
			return claimArgs{}, invalid("", "%s", err.Error())
		}
		wait = min(d, s.cfg.MaxWait)
	}
	return claimArgs{
		cmd: fsm.Claim{
			WorkerID: req.WorkerID,
			Queues:   req.Queues,
			Types:    req.Types,
			Shell:    req.Shell,
			Max:      max(req.Max, 1),
			LeaseTTL: int64(s.cfg.LeaseTTL),
		},
		wait: wait,
	}, nil
}

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	var req wire.ClaimRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	args, err := s.claimArgs(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fc := s.fenceFields(r)
	fc.claim(&args.cmd, true, req.ClaimSeq)
	var reports func() []wire.BatchReportResult
	if len(req.Reports) > 0 {
		reps, err := batchReports(req.Reports)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, rep := range reps {
			fc.report(rep)
		}
		// Proposed now, beside the claim: one log entry carries both.
		reports = s.startReports(r.Context(), reps)
	}
	jobs, err := s.boundedClaim(r.Context(), args)
	out := wire.ClaimResponse{LeaseTTLMillis: s.cfg.LeaseTTL.Milliseconds()}
	if reports != nil {
		out.Reports = reports()
	}
	if err != nil && out.Reports == nil {
		s.fail(w, r, err)
		return
	}
	out.Jobs = toWireList(jobs, s.now())
	writeJSON(w, http.StatusOK, out)
}

// handleNext is the seed's claim: GET /jobs/next?worker_id=W[&wait=][&queue=].
// Without a queue it serves every queue, "default" first.
func (s *Server) handleNext(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := wire.ClaimRequest{WorkerID: q.Get("worker_id"), Wait: q.Get("wait"), Shell: true}
	if queue := q.Get("queue"); queue != "" {
		req.Queues = []string{queue}
	}
	args, err := s.claimArgs(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if args.anyQueue = q.Get("queue") == ""; args.anyQueue {
		args.cmd.Queues = s.allQueues()
	}
	s.fenceFields(r).claim(&args.cmd, false, 0) // the seed's worker gets no lease
	jobs, err := s.boundedClaim(r.Context(), args)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(jobs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, toWire(jobs[0], s.now()))
}

// allQueues lists the queues a claim from any queue names: "default", then
// those with a job due, the longest-waiting first, wire.MaxQueues in all
// (fsm.AnyQueues).
func (s *Server) allQueues() []string {
	return s.state.AnyQueues(s.now(), wire.MaxQueues)
}

func (s *Server) handleJobHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req wire.HeartbeatRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	hb := &fsm.Heartbeat{JobID: r.PathValue("id"), Lease: req.Lease, LeaseTTL: int64(s.cfg.LeaseTTL)}
	s.fenceFields(r).heartbeat(hb)
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpHeartbeat, Heartbeat: hb})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.HeartbeatResponse{LeaseExpiresAt: optTime(res.Deadline)}
	if len(res.Actions) > 0 {
		out.Action = res.Actions[0].Action
		out.PreemptionEpoch = res.Actions[0].Epoch
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDone(w http.ResponseWriter, r *http.Request) { s.report(w, r, true) }
func (s *Server) handleFail(w http.ResponseWriter, r *http.Request) { s.report(w, r, false) }

// report ends an attempt. Without a lease (the seed's workers send no
// body) it applies to the job's current attempt if that was claimed with
// GET /jobs/next; the FSM refuses it (lease_required) for one claimed with
// POST /jobs/claim, and (forbidden) for another token's attempt.
func (s *Server) report(w http.ResponseWriter, r *http.Request, success bool) {
	var req wire.ReportRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if !s.knownJob(w, r) {
		return
	}
	rep := &fsm.Report{
		JobID:    r.PathValue("id"),
		Lease:    req.Lease,
		Success:  success,
		ExitCode: req.ExitCode,
		Output:   req.Output,
		Error:    req.Error,
		Final:    req.Retry != nil && !*req.Retry,
		Draw:     draw(),
	}
	s.fenceFields(r).report(rep)
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpReport, Report: rep})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := res.Jobs[0]
	s.attemptEnded(r.Context(), j, false)
	writeJSON(w, http.StatusOK, toWire(j, s.now()))
}

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
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpRegister, Register: reg})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.workerWire(res.Worker, 0))
}

func checkWorker(w *wire.Worker) error {
	switch {
	case w.ID == "":
		return invalid("id", "must not be empty")
	case len(w.ID) > MaxKeyBytes:
		return invalid("id", "longer than %d bytes", MaxKeyBytes)
	case len(w.Tags) > MaxMapEntries:
		return invalid("tags", "more than %d tags", MaxMapEntries)
	case len(w.Queues) > MaxQueues:
		return invalid("queues", "more than %d queues", MaxQueues)
	}
	if err := checkResources(&w.Resources, func(s string) string { return s }); err != nil {
		return err
	}
	for _, q := range w.Queues {
		if err := validName("queues", q); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) handleWorkerHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Jobs       *[]wire.JobLease `json:"jobs"`
		ClaimsFrom uint64           `json:"claims_from"`
		ClaimsTo   uint64           `json:"claims_to"`
	}
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Jobs != nil && len(*req.Jobs) > MaxHeartbeatJobs {
		s.fail(w, r, invalid("jobs", "more than %d leases", MaxHeartbeatJobs))
		return
	}
	if req.ClaimsFrom > req.ClaimsTo {
		s.fail(w, r, invalid("claims_from", "must not be above claims_to"))
		return
	}
	hb := &fsm.WorkerHeartbeat{WorkerID: r.PathValue("id"), LeaseTTL: int64(s.cfg.LeaseTTL)}
	s.fenceFields(r).workerHeartbeat(hb, req.ClaimsFrom, req.ClaimsTo)
	if req.Jobs != nil {
		hb.Listed = true
		for _, l := range *req.Jobs {
			hb.Leases = append(hb.Leases, fsm.LeaseRef{JobID: l.JobID, Lease: l.Lease})
		}
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: hb})
	if !errors.Is(err, fsm.ErrForbidden) {
		s.lastPoll.Store(hb.WorkerID, time.Now()) // heard from, unless from another token
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
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleWorkers(w http.ResponseWriter, r *http.Request) {
	workers, err := s.state.Workers()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	running := s.state.RunningByWorker()
	out := wire.WorkerList{Workers: make([]wire.Worker, 0, len(workers))}
	for _, wk := range workers {
		out.Workers = append(out.Workers, s.workerWire(wk, running[wk.ID]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) workerWire(w *store.Worker, running int) wire.Worker {
	seen := time.Unix(0, w.LastHeartbeat)
	if t, ok := s.lastPoll.Load(w.ID); ok && t.(time.Time).After(seen) {
		seen = t.(time.Time)
	}
	status := "active"
	if s.cfg.Now().Sub(seen) > s.cfg.WorkerOfflineAfter {
		status = "offline"
	}
	return wire.Worker{
		ID: w.ID, ExecAddr: w.ExecAddr, Tags: w.Tags, Queues: w.Queues, Status: status,
		Resources:     wire.Resources{VRAMMB: w.VRAMMB, MemoryMB: w.MemoryMB, CPUMillis: w.CPUMillis, Slots: w.Slots},
		LastHeartbeat: seen.UTC(), RegisteredAt: time.Unix(0, w.RegisteredAt).UTC(),
		RunningJobs: running,
	}
}

// QueueInfo is one entry of GET /queues.
type QueueInfo struct {
	Name   string         `json:"name"`
	Paused bool           `json:"paused"`
	Counts map[string]int `json:"counts"`
	// OldestPendingSeconds is how long the longest-waiting runnable job of
	// the queue has been runnable; absent when none is.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds,omitempty"`
}

func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	var out []QueueInfo
	now := s.now()
	oldest := s.state.OldestReady(now)
	for _, q := range s.state.Queues() {
		c := make(map[string]int, len(q.Counts))
		for st, n := range q.Counts {
			c[string(st)] = n
		}
		qi := QueueInfo{Name: q.Name, Paused: q.Paused, Counts: c}
		if at, ok := oldest[q.Name]; ok {
			qi.OldestPendingSeconds = max(time.Duration(now-at).Seconds(), 0)
		}
		out = append(out, qi)
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": out})
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request)  { s.pause(w, r, true) }
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) { s.pause(w, r, false) }

func (s *Server) pause(w http.ResponseWriter, r *http.Request, paused bool) {
	name := r.PathValue("name")
	if err := validName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	known := slices.ContainsFunc(s.state.Queues(), func(q fsm.QueueStats) bool { return q.Name == name })
	if !known && paused {
		s.fail(w, r, &badRequest{field: "name", reason: "unknown queue " + name})
		return
	}
	if _, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpPauseQueue, Queue: &fsm.PauseQueue{Name: name, Paused: paused}}); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, QueueInfo{Name: name, Paused: paused})
}
