package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// handleBackup streams a consistent copy of the state file.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="workron-backup.db"`)
	if _, err := s.node.WriteBackup(w); err != nil {
		s.logger.Error("backup failed", "err", err)
	}
}

// handleRestore replaces the whole cluster's state with the backup in the
// body, through Raft (raftnode.Node.Restore): every node gets it. A body
// that is not a whole backup is refused (400 bad_backup) and changes nothing.
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	info, err := s.node.Restore(r.Context(), http.MaxBytesReader(w, r.Body, s.cfg.MaxRestoreBytes))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &tooBig):
		writeError(w, wire.CodeTooLarge,
			fmt.Sprintf("a backup of more than %d bytes; nothing was done", tooBig.Limit))
		return
	case errors.Is(err, store.ErrDamaged):
		writeError(w, wire.CodeBadBackup, "not restored, nothing was changed: the backup is "+
			strings.TrimPrefix(strings.TrimPrefix(err.Error(), "restore: "), "store: "))
		return
	case errors.Is(err, raftnode.ErrUnknownOutcome):
		writeError(w, wire.CodeOutcomeUnknown,
			"the restore may or may not have been done; restoring the same backup again is safe")
		return
	default:
		s.fail(w, r, err)
		return
	}
	s.logger.Info("restored a backup", "jobs", info.Jobs, "bytes", info.Size, "backup_index", info.Applied, "index", info.Index)
	writeJSON(w, http.StatusOK, wire.Restore{Jobs: info.Jobs, Bytes: info.Size, BackupIndex: info.Applied, Index: info.Index})
}
