package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// report is one /done or /fail the fake server received.
type report struct {
	Kind   string // "done" or "fail"
	Req    wire.ReportRequest
	Status int // what the fake answered
}

// fakeServer is an in-memory stand-in for a Workron node: it keeps jobs and
// workers, leases jobs on claim (long-polling briefly), renews leases on
// worker heartbeats (naming those listed it did not renew, as the cluster
// does) and answers stale reports with 409. It never expires a lease:
// reap does, as the cluster's reaper would.
type fakeServer struct {
	URL string
	ttl time.Duration

	mu        sync.Mutex
	jobs      map[string]*wire.Job
	pending   []string // job ids, oldest first
	nextID    int
	nextLease uint64
	workers   map[string]wire.Worker
	registers int
	beats     int
	waiting   int             // claims being held open
	cancels   map[string]bool // job ids to send a cancel action for
	reports   map[string][]report
	batches   int           // POST /jobs/reports requests
	refuse    int           // answer this many more report-carrying requests 503
	carried   int           // reports that came inside claims
	carriers  int           // claims that carried reports
	changed   chan struct{} // closed and replaced when a job is added
	loseNext  int           // lease the jobs of this many more claims, then answer 502
	lost      []uint64      // the ClaimSeq of each claim whose reply was lost
	seqs      []uint64      // the ClaimSeq of each claim, in arrival order
	beatReqs  []wire.WorkerHeartbeatRequest
	protocol2 bool   // refuse progress and results as a cluster at protocol 2 does
	beatFails int    // answer this many more worker heartbeats with beatErr
	beatErr   [2]any // status (int) and code (string) of those answers
	oldBeats  bool   // name no lost leases in heartbeat replies, as releases before lost did

	// Durable steps (fake_park_test.go).
	steps    map[string]map[string]*wire.Step // job id -> key -> step
	children map[string]fakeChild             // child id -> its parent's step
	parks    int                              // attempts parked
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{
		ttl:     600 * time.Millisecond,
		jobs:    make(map[string]*wire.Job),
		workers: make(map[string]wire.Worker),
		cancels: make(map[string]bool),
		reports: make(map[string][]report),
		changed: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", f.handleSubmit)
	mux.HandleFunc("GET /jobs/{id}", f.handleGet)
	mux.HandleFunc("POST /workers/register", f.handleRegister)
	mux.HandleFunc("POST /workers/{id}/heartbeat", f.handleWorkerHeartbeat)
	mux.HandleFunc("POST /jobs/claim", f.handleClaim)
	mux.HandleFunc("POST /jobs/{id}/done", f.handleReport("done"))
	mux.HandleFunc("POST /jobs/{id}/fail", f.handleReport("fail"))
	mux.HandleFunc("POST /jobs/reports", f.handleBatchReport)
	f.routeSteps(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// add queues job as pending and returns its id.
func (f *fakeServer) add(job wire.Job) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	job.ID = "job-" + strconv.Itoa(f.nextID)
	job.Status = wire.StatusPending
	if job.Queue == "" {
		job.Queue = "default"
	}
	f.jobs[job.ID] = &job
	f.pending = append(f.pending, job.ID)
	close(f.changed)
	f.changed = make(chan struct{})
	return job.ID
}

func (f *fakeServer) job(id string) wire.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.jobs[id]
}

// cancel makes the next heartbeat of the job's worker carry a cancel action.
func (f *fakeServer) cancel(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels[id] = true
}

// steal gives a running job a new lease, as if another worker claimed it,
// and returns the number of worker heartbeats received before.
func (f *fakeServer) steal(id string) (beats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextLease++
	f.jobs[id].Lease = f.nextLease
	return f.beats
}

// reap takes a running job back as the cluster's reaper does when its
// lease expires: it is pending again (but not handed out again), on no
// worker, under the same lease. It returns the number of worker
// heartbeats received before.
func (f *fakeServer) reap(id string) (beats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[id].Status = wire.StatusPending
	f.jobs[id].WorkerID = ""
	return f.beats
}

// failBeats answers the next n worker heartbeats with status and code.
func (f *fakeServer) failBeats(n, status int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beatFails, f.beatErr = n, [2]any{status, code}
}

// forget drops a worker, so its next heartbeat gets 404.
func (f *fakeServer) forget(workerID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.workers, workerID)
}

func (f *fakeServer) counts() (registers, beats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.registers, f.beats
}

// reportRequests returns how many POST /jobs/reports came, how many
// claims carried reports and how many reports those claims carried.
func (f *fakeServer) reportRequests() (batches, carriers, carried int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches, f.carriers, f.carried
}

// refuseReports makes the next n requests that carry reports fail with 503.
func (f *fakeServer) refuseReports(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = n
}

func (f *fakeServer) waitingClaims() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

func (f *fakeServer) reportsOf(id string) []report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]report(nil), f.reports[id]...)
}

// waitReport waits for the first report on job id and returns it.
func (f *fakeServer) waitReport(t *testing.T, id string) report {
	t.Helper()
	waitFor(t, 10*time.Second, "a report on "+id, func() bool { return len(f.reportsOf(id)) > 0 })
	return f.reportsOf(id)[0]
}

// waitStatus waits until job id has status.
func (f *fakeServer) waitStatus(t *testing.T, id, status string) {
	t.Helper()
	waitFor(t, 10*time.Second, id+" "+status, func() bool { return f.job(id).Status == status })
}

func (f *fakeServer) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req wire.SubmitRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalid, err.Error())
		return
	}
	id := f.add(wire.Job{Command: req.Command, Type: req.Type, Payload: req.Payload,
		Env: req.Env, Queue: req.Queue, Timeout: req.Timeout})
	writeJSON(w, http.StatusCreated, f.job(id))
}

func (f *fakeServer) handleGet(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	job, ok := f.jobs[r.PathValue("id")]
	var out wire.Job
	if ok {
		out = *job
	}
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no such job")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeServer) handleRegister(w http.ResponseWriter, r *http.Request) {
	var wk wire.Worker
	if err := json.NewDecoder(r.Body).Decode(&wk); err != nil || wk.ID == "" {
		writeError(w, http.StatusBadRequest, "invalid", "worker id required")
		return
	}
	f.mu.Lock()
	f.workers[wk.ID] = wk
	f.registers++
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, wk)
}

func (f *fakeServer) handleWorkerHeartbeat(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.workers[id]; !ok {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "unknown worker")
		return
	}
	f.beats++
	if f.beatFails > 0 {
		f.beatFails--
		writeError(w, f.beatErr[0].(int), f.beatErr[1].(string), "heartbeat refused")
		return
	}
	var req wire.WorkerHeartbeatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err == nil {
		f.beatReqs = append(f.beatReqs, req)
	}
	if f.protocol2 && carriesProgress(req) {
		writeError(w, http.StatusServiceUnavailable, wire.CodeUpgradeInProgress, "upgrade in progress")
		return
	}
	var resp wire.WorkerHeartbeatResponse
	if !f.oldBeats {
		resp.Lost = f.lostOf(id, req.Jobs)
	}
	for _, job := range f.jobs {
		if job.WorkerID != id || (job.Status != wire.StatusRunning && job.Status != wire.StatusCancelling) {
			continue
		}
		resp.Renewed++
		if f.cancels[job.ID] {
			job.Status = wire.StatusCancelling
			resp.Actions = append(resp.Actions, wire.JobAction{JobID: job.ID, Lease: job.Lease, Action: wire.ActionCancel})
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// lostOf names the leases of listed that worker does not hold, with the
// cluster's reasons; called with f.mu held.
func (f *fakeServer) lostOf(worker string, listed []wire.JobLease) []wire.LostLease {
	var out []wire.LostLease
	for _, jl := range listed {
		job, ok := f.jobs[jl.JobID]
		reason := ""
		switch {
		case !ok:
			reason = wire.CodeNotFound
		case jl.Lease == job.Lease && job.Status != wire.StatusRunning && job.Status != wire.StatusCancelling:
			reason = wire.CodeNotRunning
		case jl.Lease != job.Lease || job.WorkerID != worker:
			reason = wire.CodeStaleLease
		default:
			continue
		}
		out = append(out, wire.LostLease{JobID: jl.JobID, Lease: jl.Lease, Reason: reason})
	}
	return out
}

func (f *fakeServer) handleClaim(w http.ResponseWriter, r *http.Request) {
	var req wire.ClaimRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalid, err.Error())
		return
	}
	wait, err := wire.ParseDuration("wait", req.Wait)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	f.mu.Lock()
	f.seqs = append(f.seqs, req.ClaimSeq)
	f.mu.Unlock()
	var results []wire.BatchReportResult
	if len(req.Reports) > 0 {
		f.mu.Lock()
		refused := f.refuse > 0
		if refused {
			f.refuse--
		} else {
			f.carried += len(req.Reports)
			f.carriers++
			results = f.applyReports(req.Reports)
		}
		f.mu.Unlock()
		if refused {
			writeError(w, http.StatusServiceUnavailable, wire.CodeNoLeader, "no leader")
			return
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	f.mu.Lock()
	f.waiting++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}()
	for {
		jobs, changed := f.lease(req)
		if len(jobs) > 0 && f.loseReply(req.ClaimSeq) {
			writeError(w, http.StatusBadGateway, wire.CodeOutcomeUnknown, "the leader went away")
			return
		}
		if len(jobs) > 0 {
			writeJSON(w, http.StatusOK, wire.ClaimResponse{Jobs: jobs, LeaseTTLMillis: f.ttl.Milliseconds(), Reports: results})
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			writeJSON(w, http.StatusOK, wire.ClaimResponse{Jobs: []wire.Job{}, LeaseTTLMillis: f.ttl.Milliseconds(), Reports: results})
			return
		case <-r.Context().Done():
			return
		}
	}
}

// claimSeqs returns the ClaimSeq of every claim so far, in arrival order.
func (f *fakeServer) claimSeqs() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seqs)
}

// loseReply reports whether the reply of claim seq, which leased jobs, is
// to be lost, as when the leader dies after committing the claim.
func (f *fakeServer) loseReply(seq uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loseNext == 0 {
		return false
	}
	f.loseNext--
	f.lost = append(f.lost, seq)
	return true
}

// loseReplies makes the next n claims that lease jobs answer 502.
func (f *fakeServer) loseReplies(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loseNext = n
}

// lostClaims returns the claim numbers of the lost replies, and the
// heartbeat requests received.
func (f *fakeServer) lostClaims() ([]uint64, []wire.WorkerHeartbeatRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.lost...), append([]wire.WorkerHeartbeatRequest(nil), f.beatReqs...)
}

// lease hands up to req.Max pending jobs to req.WorkerID. It ignores Types,
// so a worker can be sent a type it has no handler for.
func (f *fakeServer) lease(req wire.ClaimRequest) ([]wire.Job, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wire.Job
	var rest []string
	for _, id := range f.pending {
		job := f.jobs[id]
		if len(out) >= max(req.Max, 1) || (job.Command != "" && !req.Shell && len(req.Types) > 0) {
			rest = append(rest, id)
			continue
		}
		f.nextLease++
		job.Attempts++
		job.Lease = f.nextLease
		job.Status = wire.StatusRunning
		job.WorkerID = req.WorkerID
		job.Journal = f.journalOf(id)
		out = append(out, *job)
	}
	f.pending = rest
	return out, f.changed
}

func (f *fakeServer) handleReport(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req wire.ReportRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, wire.CodeInvalid, err.Error())
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		job, status, code := f.applyReport(r.PathValue("id"), kind, req)
		if status != http.StatusOK {
			writeError(w, status, code, "report refused: "+code)
			return
		}
		writeJSON(w, http.StatusOK, job)
	}
}

// handleBatchReport serves POST /jobs/reports.
func (f *fakeServer) handleBatchReport(w http.ResponseWriter, r *http.Request) {
	var req wire.BatchReportRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalid, err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	if f.refuse > 0 {
		f.refuse--
		writeError(w, http.StatusServiceUnavailable, wire.CodeNoLeader, "no leader")
		return
	}
	writeJSON(w, http.StatusOK, wire.BatchReportResponse{Results: f.applyReports(req.Reports)})
}

// applyReports records reports (sent alone or inside a claim) with
// f.mu held and answers each.
func (f *fakeServer) applyReports(reps []wire.BatchReport) []wire.BatchReportResult {
	out := make([]wire.BatchReportResult, len(reps))
	for i, br := range reps {
		kind := "done"
		if br.Status == wire.StatusFailed {
			kind = "fail"
		}
		if f.protocol2 && (br.Result != nil || br.Progress != nil) {
			out[i] = wire.BatchReportResult{JobID: br.JobID, Code: wire.CodeUpgradeInProgress, Error: "upgrade in progress"}
			continue
		}
		job, _, code := f.applyReport(br.JobID, kind, br.ReportRequest)
		out[i] = wire.BatchReportResult{JobID: br.JobID, Status: string(job.Status), Code: code}
		if code != "" {
			out[i].Error = "report refused: " + code
		}
	}
	return out
}

// applyReport records one report with f.mu held and returns the job, the
// HTTP status of the answer and its error code.
func (f *fakeServer) applyReport(id, kind string, req wire.ReportRequest) (wire.Job, int, string) {
	job, ok := f.jobs[id]
	if !ok {
		return wire.Job{}, http.StatusNotFound, wire.CodeNotFound
	}
	if req.Lease != job.Lease || (job.Status != wire.StatusRunning && job.Status != wire.StatusCancelling) {
		f.reports[id] = append(f.reports[id], report{Kind: kind, Req: req, Status: http.StatusConflict})
		return wire.Job{}, http.StatusConflict, wire.CodeStaleLease
	}
	f.reports[id] = append(f.reports[id], report{Kind: kind, Req: req, Status: http.StatusOK})
	job.ExitCode, job.Output, job.LastError = req.ExitCode, req.Output, req.Error
	switch {
	case kind == "done":
		job.Status = wire.StatusDone
	case job.Status == wire.StatusCancelling && req.Retry != nil && !*req.Retry:
		job.Status = wire.StatusCancelled
	default:
		job.Status = wire.StatusFailed
	}
	f.childEnded(id, kind == "done", req)
	return *job, http.StatusOK, ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, wire.Error{Error: msg, Code: code})
}
