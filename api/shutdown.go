package api

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Drain prepares the node to stop: long-polls parked here end at once with
// the answer of a wait that ran out (no job), later ones do not wait, and
// long-polls this node forwarded to the leader are cut (504, as nobody can
// say whether the leader claimed a job for them meanwhile). Every other
// request in flight goes on. Safe to call twice.
func (s *Server) Drain() {
	s.drainOnce.Do(func() { close(s.draining) })
}

func (s *Server) isDraining() bool {
	select {
	case <-s.draining:
		return true
	default:
		return false
	}
}

// Shutdown stops hs, which serves this Server's Handler, the way a node
// stops: Drain; then hs.Shutdown, which stops accepting and waits for the
// requests in flight, forwarded ones included, to finish; if ctx ends
// first, cancelRequests (which cancels the requests' base context) makes
// those left answer (a forwarded one 504, or 503 if nothing reached the
// leader) and they get a moment to do so before hs is closed. Stop Raft
// only after it returns.
func (s *Server) Shutdown(ctx context.Context, hs *http.Server, cancelRequests context.CancelFunc) error {
	s.Drain()
	err := hs.Shutdown(ctx)
	cancelRequests()
	if err == nil {
		return nil
	}
	grace, cancel := context.WithTimeout(context.Background(), answerGrace)
	defer cancel()
	if gerr := hs.Shutdown(grace); gerr != nil {
		return errors.Join(err, hs.Close())
	}
	return err
}

// answerGrace is how long requests still running when a shutdown's
// deadline passed get to answer after their contexts are cancelled.
const answerGrace = 2 * time.Second
