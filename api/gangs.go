package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func init() {
	// Who may call the gang routes when tokens are required (see auth.go).
	routeRoles["GET /gangs/{id}"] = RoleClient
	routeRoles["POST /jobs/{id}/checkpoint"] = RoleWorker
	routeRoles["POST /jobs/{id}/preempted"] = RoleWorker
}

// submitGang serves POST /jobs with a gang_size: N tasks from one template.
// The reply is the v0 worker API's {"gang_id","tasks"}.
func (s *Server) submitGang(w http.ResponseWriter, r *http.Request, req *wire.SubmitRequest, warnings []string) {
	size := req.GangSize
	switch {
	case size < 1 || size > fsm.MaxGangSize:
		s.fail(w, r, invalid("gang_size", "must be between 1 and %d, got %d (0 or absent submits one plain job)", fsm.MaxGangSize, size))
		return
	case len(req.DependsOn) > 0:
		s.fail(w, r, invalid("depends_on", "a gang cannot depend on other jobs"))
		return
	case req.ConcurrencyKey != "":
		s.fail(w, r, invalid("concurrency_key", "a gang's tasks take no concurrency key (a gang is placed whole)"))
		return
	}
	one := *req
	one.GangSize = 0
	nj, err := newJob(&one, fieldIn(""), s.cfg.Now(), s.cfg.Retention)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	nj.TraceParent = s.jobTrace(r) // every task's: the gang is one trace
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: size, Job: nj}})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	traceJobs(r.Context(), res.Jobs...)
	status := http.StatusCreated
	if res.Existing {
		status = http.StatusOK
	}
	s.logger.Debug("gang submitted", "gang", res.Gang.ID, "size", size, "queue", nj.Queue, "request_id", requestID(r.Context()))
	writeJSON(w, status, wire.GangSubmitResponse{GangID: res.Gang.ID, Tasks: res.Gang.Tasks, Warnings: warnings})
}

func (s *Server) handleGetGang(w http.ResponseWriter, r *http.Request) {
	g, jobs, err := s.state.Gang(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now()
	out := wire.Gang{
		GangID: g.ID, Size: g.Size, Status: string(g.Status), Epoch: g.Epoch, Tasks: g.Tasks,
		Workers: g.Workers, Queue: g.Queue, Priority: g.Priority, Tags: g.Tags, LastError: g.LastError,
		ReservedAt: optTime(g.ReservedAt), DrainStarted: optTime(g.DrainAt), Jobs: toWireList(jobs, now),
	}
	s.explainAll(out.Jobs, jobs)
	if !g.Resources.IsZero() {
		out.Resources = resourcesWire(g.Resources)
	}
	if !g.Status.Finished() {
		out.RunAt = optTime(g.RunAt)
	}
	if g.Status == store.GangBlocked {
		out.Unschedulable = unschedulableReason(g.Resources, g.Tags, g.Size, s.activeWorkers(s.cfg.Now()))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleCheckpoint keeps the raw body as a preempted gang task's checkpoint
// (at most fsm.MaxCheckpointBytes; 413 beyond). Its next attempt gets it as
// CHECKPOINT_DATA. A stale epoch is 409 and changes nothing.
func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	epoch, err := epochParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, fsm.MaxCheckpointBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.fail(w, r, &badRequest{reason: fmt.Sprintf("a checkpoint is at most %d bytes", fsm.MaxCheckpointBytes), tooBig: true})
			return
		}
		s.fail(w, r, &badRequest{reason: "reading checkpoint: " + err.Error()})
		return
	}
	id := r.PathValue("id")
	ck := &fsm.Checkpoint{JobID: id, Epoch: epoch, Data: data}
	s.fenceFields(r).gangCall(&ck.Token)
	if _, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpCheckpoint, Checkpoint: ck}); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.CheckpointReply{JobID: id, Epoch: epoch, Bytes: len(data)})
}

// handlePreempted acknowledges that a gang task stopped for the drain of
// ?epoch=; its attempt is given back. A stale epoch is 409.
func (s *Server) handlePreempted(w http.ResponseWriter, r *http.Request) {
	epoch, err := epochParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := &fsm.Preempted{JobID: r.PathValue("id"), Epoch: epoch}
	s.fenceFields(r).gangCall(&p.Token)
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpPreempted, Preempted: p})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := res.Jobs[0]
	s.logger.Info("gang task preempted", "job", j.ID, "gang", j.GangID, "epoch", epoch, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusOK, toWire(j, s.now()))
}

// unschedulable says why no active worker could ever run a waiting job as
// it asks, or "" when one could (or the job is not waiting to be placed).
func (v *waitView) unschedulable(j *store.Job) string {
	if j.Resources.IsZero() && len(j.Tags) == 0 {
		return ""
	}
	n := 1
	switch {
	case j.GangID != "" && j.Status == store.StatusBlocked:
		n = j.GangSize
	case j.Status == store.StatusPending:
	default:
		return ""
	}
	return unschedulableReason(j.Resources, j.Tags, n, v.active())
}

// unschedulableReason compares what n tasks ask for with what the workers
// offer in all (not what they have free: that changes).
func unschedulableReason(need store.Resources, tags []string, n int, workers []*store.Worker) string {
	dims := []struct {
		what string
		need int
		get  func(store.Resources) int
	}{
		{"MB VRAM", need.VRAMMB, func(r store.Resources) int { return r.VRAMMB }},
		{"MB memory", need.MemoryMB, func(r store.Resources) int { return r.MemoryMB }},
		{"CPU millicores", need.CPUMillis, func(r store.Resources) int { return r.CPUMillis }},
		{"slots", need.Slots, func(r store.Resources) int { return r.Slots }},
	}
	for _, d := range dims {
		if d.need <= 0 {
			continue
		}
		largest := -1
		for _, w := range workers {
			largest = max(largest, d.get(w.Capacity()))
		}
		switch {
		case largest < 0:
			return fmt.Sprintf("needs %d %s; no worker is active", d.need, d.what)
		case largest < d.need:
			return fmt.Sprintf("needs %d %s; largest worker has %d", d.need, d.what, largest)
		}
	}
	fit := 0
	tagged := false
	for _, w := range workers {
		if store.HasTags(w.Tags, tags) {
			tagged = true
			if need.Within(w.Capacity()) {
				fit++
			}
		}
	}
	switch {
	case len(workers) == 0:
		return fmt.Sprintf("needs tags %s; no worker is active", strings.Join(tags, ","))
	case !tagged:
		return fmt.Sprintf("needs tags %s; no active worker has them all", strings.Join(tags, ","))
	case fit == 0:
		return "needs " + describeNeeds(need, tags) + "; no active worker has all of it"
	case fit < n && describeNeeds(need, tags) == "":
		return fmt.Sprintf("gang of %d needs %d distinct active workers; %d are active", n, n, fit)
	case fit < n:
		return fmt.Sprintf("gang of %d needs %d workers with %s; %d active workers have it", n, n, describeNeeds(need, tags), fit)
	}
	return ""
}

func describeNeeds(r store.Resources, tags []string) string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{r.VRAMMB, "MB VRAM"}, {r.MemoryMB, "MB memory"}, {r.CPUMillis, "CPU millicores"}, {r.Slots, "slots"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(tags) > 0 {
		parts = append(parts, "tags "+strings.Join(tags, ","))
	}
	return strings.Join(parts, ", ")
}
