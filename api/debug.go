package api

import (
	"net/http"

	"github.com/workron/workron/api/wire"
)

// handleDigest serves GET /debug/digest from this node's own state, never
// forwarded: a hash of the whole store with the applied index it belongs to,
// Raft's commit and last log index, and the store's self-check. Two nodes
// that report the same applied index must report the same digest; the chaos
// harness (internal/tools/chaos) compares them after healing every fault.
func (s *Server) handleDigest(w http.ResponseWriter, r *http.Request) {
	st := s.node.Stats()
	applied, digest, err := s.state.DigestAt()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.Digest{NodeID: s.node.ID(), AppliedIndex: applied, CommitIndex: st.CommitIndex,
		LastLogIndex: st.LastLogIndex, Digest: digest, Check: "ok"}
	if err := s.state.Check(); err != nil {
		out.Check = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}
