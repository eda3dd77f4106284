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
		c := make(map[string]int, len(q.Counts))
		for st, n := range q.Counts {
			c[string(st)] = n
		}
		qi := wire.Queue{Name: q.Name, Paused: q.Paused, Counts: c}
		if at, ok := oldest[q.Name]; ok {
			qi.OldestPendingSeconds = max(time.Duration(now-at).Seconds(), 0)
		}
		out = append(out, qi)
	}
	writeJSON(w, http.StatusOK, wire.QueueList{Queues: out})
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
	writeJSON(w, http.StatusOK, wire.Queue{Name: name, Paused: paused})
}
