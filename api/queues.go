package api

import (
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// handleQueues lists the queues with their jobs by status (GET /queues).
func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	var out []wire.Queue
	now := s.now()
	oldest := s.state.OldestReady(now)
	for _, q := range s.state.Queues() {
		out = append(out, queueWire(q, oldest, now))
	}
	writeJSON(w, http.StatusOK, wire.QueueList{Queues: out})
}

// handleGetQueue shows one queue (GET /queues/{name}); 404 for a queue no
// job has used and none has paused.
func (s *Server) handleGetQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := validName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	q, ok := s.queue(name)
	if !ok {
		s.fail(w, r, refuse(wire.CodeNotFound, "queue %s: no job has used it", name))
		return
	}
	writeJSON(w, http.StatusOK, q)
}

// queue is one queue as the API shows it, and whether it exists.
func (s *Server) queue(name string) (wire.Queue, bool) {
	now := s.now()
	for _, q := range s.state.Queues() {
		if q.Name == name {
			return queueWire(q, s.state.OldestReady(now), now), true
		}
	}
	return wire.Queue{Name: name, Counts: map[string]int{}}, false
}

// queueWire shows a queue's stats; counts is {} (never null) for a queue
// with no jobs.
func queueWire(q fsm.QueueStats, oldest map[string]int64, now int64) wire.Queue {
	c := make(map[string]int, len(q.Counts))
	for st, n := range q.Counts {
		c[string(st)] = n
	}
	qi := wire.Queue{Name: q.Name, Paused: q.Paused, Counts: c}
	if at, ok := oldest[q.Name]; ok {
		qi.OldestPendingSeconds = max(time.Duration(now-at).Seconds(), 0)
	}
	return qi
}

// handlePause and handleResume stop and restart claims from a queue
// (POST /queues/{name}/pause, /resume). A queue may be paused before any
// job uses it; GET /queues then lists it, paused, with no counts.
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) { s.pause(w, r, true) }

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) { s.pause(w, r, false) }

func (s *Server) pause(w http.ResponseWriter, r *http.Request, paused bool) {
	name := r.PathValue("name")
	if err := validName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpPauseQueue, Queue: &fsm.PauseQueue{Name: name, Paused: paused}}); err != nil {
		s.fail(w, r, err)
		return
	}
	q, _ := s.queue(name)
	q.Paused = paused
	writeJSON(w, http.StatusOK, q)
}
