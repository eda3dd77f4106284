package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

func (s *Server) now() int64 { return s.cfg.Now().UnixNano() }

// propose runs one command on the leader with the request's context.
// A proposal is not cancelled with its request: once Raft has the command it
// will commit, and cutting the wait short (a client gone, a server shutting
// down) would only turn a known answer into an unknown one, e.g. a claim
// whose jobs then sit leased to nobody until their lease expires.
func (s *Server) propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), proposeTimeout)
	defer cancel()
	res, err := s.node.Propose(pctx, cmd)
	if err == nil || !nothingDone(err) {
		markTouched(ctx)
	}
	return res, err
}

// proposeTogether is propose for commands that must share one log entry
// (raftnode's ProposeTogether); the error is the group's.
func (s *Server) proposeTogether(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), proposeTimeout)
	defer cancel()
	res, err := s.node.ProposeTogether(pctx, cmds)
	if err == nil || !nothingDone(err) {
		markTouched(ctx)
	}
	return res, err
}

// proposeAll is propose for several commands at once.
func (s *Server) proposeAll(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, []error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), proposeTimeout)
	defer cancel()
	res, errs := s.node.ProposeAll(pctx, cmds)
	for _, err := range errs {
		if err == nil || !nothingDone(err) {
			markTouched(ctx)
		}
	}
	return res, errs
}

// proposeTimeout bounds how long a request waits for its command to apply.
const proposeTimeout = 10 * time.Second

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req wire.SubmitRequest
	warnings, err := decodeBodyWarn(w, r, s.cfg.MaxBodyBytes, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.GangSize != 0 {
		s.submitGang(w, r, &req, warnings)
		return
	}
	nj, err := s.oneJob(r, &req, fieldIn(""))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.proposeSubmit(r.Context(), []fsm.NewJob{nj})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if res.Existing {
		status = http.StatusOK
	} else {
		s.jobsSubmitted(r.Context(), res.Jobs)
	}
	out := toWire(res.Jobs[0], s.now())
	out.Warnings = warnings
	writeJSON(w, status, out)
}

// oneJob checks the request for one job (not a gang: the caller decides
// what a gang_size means) and makes the job, naming its fields through f:
// newJob's checks, then its dependencies (checkDependencies, which names
// depends_on unprefixed); the job carries r's trace. POST /jobs and an
// invoke's child (POST /jobs/{id}/steps/{key}/invoke) both use it, so the
// two refuse the same input alike.
func (s *Server) oneJob(r *http.Request, req *wire.SubmitRequest, f func(name string) string) (fsm.NewJob, error) {
	nj, err := newJob(req, f, s.cfg.Now(), s.cfg.Retention)
	if err != nil {
		return nj, err
	}
	nj.TraceParent = s.jobTrace(r)
	if err := s.checkDependencies([]fsm.NewJob{nj}, false); err != nil {
		return nj, err
	}
	return nj, nil
}

func (s *Server) handleBatchSubmit(w http.ResponseWriter, r *http.Request) {
	var req wire.BatchSubmitRequest
	warnings, err := decodeBatchBody(w, r, s.cfg.MaxBatchBodyBytes, s.cfg.MaxBatchJobs, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Jobs) == 0 {
		s.fail(w, r, invalid("jobs", "must hold at least one job"))
		return
	}
	if len(req.Jobs) > s.cfg.MaxBatchJobs {
		s.fail(w, r, invalid("jobs", "at most %d jobs per batch, got %d", s.cfg.MaxBatchJobs, len(req.Jobs)))
		return
	}
	now, trace := s.cfg.Now(), s.jobTrace(r)
	jobs := make([]fsm.NewJob, len(req.Jobs))
	for i := range req.Jobs {
		nj, err := newJob(&req.Jobs[i], batchField(i), now, s.cfg.Retention)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		nj.TraceParent = trace
		jobs[i] = nj
	}
	if err := s.checkDependencies(jobs, true); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.proposeSubmit(r.Context(), jobs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.jobsSubmitted(r.Context(), res.Jobs)
	if prefersMinimal(r.Header) {
		writeBatchIDs(w, res.Jobs, warnings)
		return
	}
	writeJobList(w, http.StatusCreated, wire.JobList{Jobs: toWireList(res.Jobs, s.now()), Warnings: warnings})
}

// checkDependencies refuses unknown dependencies, more than
// MaxBatchDependencies in one batch, and more than MaxDependents on one job,
// before proposing; the FSM checks again that each exists when it applies,
// against the state of that moment. It reads each named job's head once.
func (s *Server) checkDependencies(jobs []fsm.NewJob, batch bool) error {
	field := func(i int) string {
		if len(jobs) > 1 {
			return fmt.Sprintf("jobs[%d].depends_on", i)
		}
		return "depends_on"
	}
	total := 0
	added := make(map[string]int) // new edges per stored job
	var order []string
	for i, nj := range jobs {
		if total += len(nj.DependsOn); total > MaxBatchDependencies {
			return invalid(field(i), "the batch's jobs have more than %d dependencies in all", MaxBatchDependencies)
		}
		seen := make(map[string]bool, len(nj.DependsOn))
		for _, d := range nj.DependsOn {
			if strings.HasPrefix(d, "$") {
				if !batch {
					return invalid("depends_on", "%q refers to a batch position; use POST /jobs/batch", d)
				}
				n, ok := batchRef(d)
				switch {
				case ok && n == i:
					return invalid(field(i), "%q is this job itself: a job cannot depend on itself", d)
				case !ok || n >= len(jobs):
					return invalid(field(i), "%q does not name another job of this batch ($0 to $%d)", d, len(jobs)-1)
				}
				continue
			}
			if seen[d] {
				continue // one edge, as the FSM counts it
			}
			seen[d] = true
			if _, ok := added[d]; !ok {
				order = append(order, d)
			}
			added[d]++
		}
	}
	if total == 0 {
		return nil // no dependency: nothing to read or check
	}
	var counts map[string]int // read only when a stored job is named
	if len(order) > 0 {
		var err error
		if counts, err = s.state.DependentCounts(order); err != nil {
			return err
		}
	}
	for i, nj := range jobs {
		for _, d := range nj.DependsOn {
			if strings.HasPrefix(d, "$") {
				continue
			}
			n, ok := counts[d]
			if !ok {
				return invalid(field(i), "unknown job %s", d)
			}
			if n+added[d] > MaxDependents {
				return invalid(field(i), "job %s has %d dependents; at most %d jobs may depend on one job", d, n, MaxDependents)
			}
		}
	}
	// Cycles among "$N" references: the FSM's own check, run before proposing.
	return fsm.CheckBatchCycles(jobs)
}

// batchRef reads a "$N" reference to the N-th job of a batch, N in its
// one spelling: decimal digits without a sign or a leading zero.
func batchRef(d string) (int, bool) {
	digits := d[1:]
	if digits == "" || (len(digits) > 1 && digits[0] == '0') ||
		strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	j, err := s.state.Job(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	traceJobs(r.Context(), j)
	out := toWire(j, s.now())
	s.waitView().explain(&out, j)
	if p, err := s.state.Park(j.ID); err != nil {
		s.logger.Warn("read park", "job_id", j.ID, "err", err)
	} else if p != nil {
		out.Parked = parkedWire(p)
	}
	one := []wire.Job{out}
	s.withJournals(one, wire.MaxJobJournalSteps, wire.MaxJobJournalSteps)
	writeJSON(w, http.StatusOK, one[0])
}

// handleCancel cancels a job and, unless ?cascade=false, its blocked
// dependents: in chunks once the cluster runs fsm.ProtocolCascade (the job
// itself at once, the leader's cascader the rest), else in one entry.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	cascade := r.URL.Query().Get("cascade") != "false"
	op := fsm.OpCancel
	if cascade && s.node.AwaitProtocol(r.Context()) >= fsm.ProtocolCascade {
		op = fsm.OpCancelChunked
	}
	s.jobCommand(w, r, fsm.Cmd{Op: op, Cancel: &fsm.Cancel{JobID: r.PathValue("id"), Cascade: cascade}})
}

// handleRetry re-queues a failed or cancelled job and, unless
// ?cascade=false, the dependents its end failed or cancelled with it (in
// chunks, as a cancel's cascade, once the cluster runs
// fsm.ProtocolCascade).
func (s *Server) handleRetry(w http.ResponseWriter, r *http.Request) {
	op := fsm.OpRetryDependents
	if s.node.AwaitProtocol(r.Context()) >= fsm.ProtocolCascade {
		op = fsm.OpRetryDependentsChunked
	}
	cmd := fsm.Cmd{Op: op, Retry: &fsm.Retry{JobID: r.PathValue("id"), Dependents: true}}
	if r.URL.Query().Get("cascade") == "false" {
		cmd = fsm.Cmd{Op: fsm.OpRetry, Retry: &fsm.Retry{JobID: r.PathValue("id")}}
	}
	s.jobCommand(w, r, cmd)
}

// jobCommand proposes a command about one job and replies with the job.
func (s *Server) jobCommand(w http.ResponseWriter, r *http.Request, cmd fsm.Cmd) {
	if !s.knownJob(w, r) {
		return
	}
	res, err := s.propose(r.Context(), cmd)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.jobChanged(r.Context(), cmd.Op, res.Jobs[0])
	for _, d := range res.Jobs[1:] {
		s.logJob(r.Context(), slog.LevelInfo, "dependent revived", d, "dependency", res.Jobs[0].ID)
	}
	writeJSON(w, http.StatusOK, toWire(res.Jobs[0], s.now()))
}

// knownJob answers 404 for a request about a job this (leading) node does
// not have, so that a mistyped id costs no log entry. The FSM checks again.
func (s *Server) knownJob(w http.ResponseWriter, r *http.Request) bool {
	_, err := s.state.Job(r.PathValue("id"))
	if errors.Is(err, fsm.ErrNotFound) {
		// A leader fresh from an election may not have applied the job's
		// submit yet: only a caught-up leader may say it does not exist.
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		verr := s.node.VerifyLeader(ctx)
		cancel()
		if verr != nil {
			err = verr
		} else {
			_, err = s.state.Job(r.PathValue("id"))
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return false
	}
	return true
}

// draw is a random number in [0,1) for backoff jitter, drawn by the leader
// and written into the command so every node computes the same delay.
func draw() float64 { return rand.Float64() }
