package api

import (
	"context"
	"fmt"
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
	writeJSON(w, http.StatusOK, wire.BatchReportResponse{Results: s.startReports(r.Context(), reps)()})
}

// batchReports validates reports and turns them into commands.
func batchReports(in []wire.BatchReport) ([]*fsm.Report, error) {
	if len(in) == 0 || len(in) > wire.MaxBatchReports {
		return nil, invalid("reports", "must hold 1 to %d reports, got %d", wire.MaxBatchReports, len(in))
	}
	reps := make([]*fsm.Report, len(in))
	for i, br := range in {
		if br.JobID == "" {
			return nil, invalid(fmt.Sprintf("reports[%d].job_id", i), "must not be empty")
		}
		if br.Status != wire.StatusDone && br.Status != wire.StatusFailed {
			return nil, invalid(fmt.Sprintf("reports[%d].status", i), "must be %q or %q, got %q", wire.StatusDone, wire.StatusFailed, br.Status)
		}
		reps[i] = &fsm.Report{
			JobID: br.JobID, Lease: br.Lease, Success: br.Status == wire.StatusDone,
			ExitCode: br.ExitCode, Output: br.Output, Error: br.Error,
			Final: br.Retry != nil && !*br.Retry, Draw: draw(),
		}
	}
	return reps, nil
}

// startReports proposes every report at once and returns a function that
// waits for their results, in order.
func (s *Server) startReports(ctx context.Context, reps []*fsm.Report) func() []wire.BatchReportResult {
	out := make([]wire.BatchReportResult, len(reps))
	done := make(chan struct{})
	go func() {
		defer close(done)
		cmds := make([]fsm.Cmd, len(reps))
		for i, rep := range reps {
			cmds[i] = fsm.Cmd{Op: fsm.OpReport, Report: rep}
		}
		results, errs := s.proposeAll(ctx, cmds)
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
	}()
	return func() []wire.BatchReportResult {
		<-done
		return out
	}
}
