package api

import (
	"context"
	"net/http"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// handleBatchReport ends many attempts in one request (POST /jobs/reports).
// Every report is checked on its own: a stale lease refuses that report and
// no other. The reports are proposed together, so the proposer packs them
// into one log entry instead of one round trip each.
func (s *Server) handleBatchReport(w http.ResponseWriter, r *http.Request) {
	var req wire.BatchReportRequest
	if err := decodeBody(w, r, s.cfg.MaxBatchBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	reps, err := batchReports(req.Reports)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fc := s.fenceFields(r)
	for _, rep := range reps {
		fc.report(rep)
	}
	ctx := s.withReportTraces(r.Context(), req.Reports)
	writeJSON(w, http.StatusOK, wire.BatchReportResponse{Results: s.startReports(ctx, reps).wait()})
}

// reportsInFlight are reports proposed by startReports.
type reportsInFlight struct {
	done chan struct{} // closed once every report is answered
	out  []wire.BatchReportResult
}

// wait waits for the reports' results, in order.
func (r *reportsInFlight) wait() []wire.BatchReportResult {
	<-r.done
	return r.out
}

// startReports proposes every report at once, without waiting for them.
func (s *Server) startReports(ctx context.Context, reps []*fsm.Report) *reportsInFlight {
	r := &reportsInFlight{done: make(chan struct{}), out: make([]wire.BatchReportResult, len(reps))}
	go func() {
		defer close(r.done)
		results, errs := s.proposeAll(ctx, reportCmds(reps))
		s.reportResults(ctx, reps, results, errs, r.out)
	}()
	return r
}

// reportCmds are the commands of reps.
func reportCmds(reps []*fsm.Report) []fsm.Cmd {
	cmds := make([]fsm.Cmd, len(reps))
	for i, rep := range reps {
		cmds[i] = fsm.Cmd{Op: fsm.OpReport, Report: rep}
	}
	return cmds
}

// reportResults fills out with what the proposals of reps gave: results[i]
// or errs[i] is reps[i]'s.
func (s *Server) reportResults(ctx context.Context, reps []*fsm.Report, results []fsm.Result, errs []error, out []wire.BatchReportResult) {
	for i, rep := range reps {
		out[i].JobID = rep.JobID
		if errs[i] != nil {
			out[i].Code, out[i].Error = reply(errs[i])
			continue
		}
		j := results[i].Jobs[0]
		out[i].Status = string(j.Status)
		s.attemptEnded(ctx, j, false)
	}
}

// handleJobHeartbeat renews one attempt's lease (POST
// /jobs/{id}/heartbeat), keeping the progress it carries, and answers
// whether to cancel or preempt it.
func (s *Server) handleJobHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req wire.HeartbeatRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := checkProgress(fieldName, req.Progress)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	hb := &fsm.Heartbeat{JobID: r.PathValue("id"), Lease: req.Lease, LeaseTTL: int64(s.cfg.LeaseTTL), Progress: p}
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

// handleDone and handleFail end an attempt (POST /jobs/{id}/done, /fail).
func (s *Server) handleDone(w http.ResponseWriter, r *http.Request) { s.report(w, r, true) }

func (s *Server) handleFail(w http.ResponseWriter, r *http.Request) { s.report(w, r, false) }

// report ends an attempt. Without a lease (v0 workers send no
// body) it applies to the job's current attempt if that was claimed with
// GET /jobs/next; the FSM refuses it (lease_required) for one claimed with
// POST /jobs/claim, and (forbidden) for another token's attempt.
func (s *Server) report(w http.ResponseWriter, r *http.Request, success bool) {
	var req wire.ReportRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	result, progress, err := reportEnd(fieldName, &req)
	if err != nil {
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
		Output:   fsm.TrimOutput(req.Output),
		Error:    fsm.TrimOutput(req.Error),
		Final:    req.Retry != nil && !*req.Retry,
		Draw:     draw(),
		Result:   result,
		Progress: progress,
	}
	if err := holdOff(rep, &req, fieldName); err != nil {
		s.fail(w, r, err)
		return
	}
	s.fenceFields(r).report(rep)
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpReport, Report: rep})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := res.Jobs[0]
	s.attemptEnded(s.withReportTraces(r.Context(), []wire.BatchReport{{JobID: rep.JobID, ReportRequest: req}}), j, false)
	writeJob(w, http.StatusOK, toWire(j, s.now()))
}
