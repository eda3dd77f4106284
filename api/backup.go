package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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

// Bounds of a restore's upload.
const (
	// restoreBuffer is the memory a restore holds of its body, taken from
	// the node's body budget (MaxBodyBytesInFlight) for the whole request:
	// the body streams through it to disk, and from disk to the leader.
	restoreBuffer = bodyChunk
	// restoreDiskReserve is the room a restore leaves free on the disk of
	// the data directory, for the node's own log and state.
	restoreDiskReserve = 64 << 20
	// restoreDiskCheck is how often, in bytes written, a restore checks
	// that the disk keeps restoreDiskReserve free.
	restoreDiskCheck = 64 << 20
	// restoreStall is the longest a restore's body may stall: each read
	// moves the read and write deadlines this far ahead, in place of the
	// server's ReadTimeout and WriteTimeout, which a backup of gigabytes
	// outlasts.
	restoreStall = time.Minute
	// restoreWork bounds the reply's wait once the body is in: verifying
	// it and restoring it through Raft, or forwarding it to the leader
	// (the read and write deadlines move this far ahead).
	restoreWork = 30 * time.Minute
	// restoreRetryAfter is the Retry-After, in seconds, of a restore
	// refused because another is in progress on the node.
	restoreRetryAfter = "10"
)

// handleRestore replaces the whole cluster's state with the backup in the
// body, through Raft (raftnode.Node.RestoreFile): every node gets it. The
// body is never held in memory: it streams to a file in this node's data
// directory (at most MaxRestoreBytes, counted as it is written: 413
// too_large beyond, and before anything is read when Content-Length says
// so or the disk has no room for it), taking restoreBuffer of the body
// budget (503 busy when it has none). On the leader the file is restored;
// a follower verifies it first (400 bad_backup, nothing sent) and streams
// it to the leader, which receives and verifies it in turn. A body that is
// not a whole backup is refused (400 bad_backup) and changes nothing. One
// restore at a time per node: another gets 409 conflict with Retry-After,
// its body unread. The file is removed whatever happens.
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > s.cfg.MaxRestoreBytes {
		s.failRestore(w, r, restoreTooLarge(s.cfg.MaxRestoreBytes))
		return
	}
	if !s.restoring.CompareAndSwap(false, true) {
		w.Header().Set("Retry-After", restoreRetryAfter)
		writeError(w, wire.CodeConflict, "another restore is in progress on this node; nothing was read or done, retry once it has ended")
		return
	}
	defer s.restoring.Store(false)
	if !s.budget.take(restoreBuffer) {
		s.fail(w, r, errBusy)
		return
	}
	defer s.budget.give(restoreBuffer)
	f, n, err := s.receiveBackup(w, r)
	if err != nil {
		s.failRestore(w, r, err)
		return
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	// With the body in, net/http reads on in the background, and a read
	// deadline passing there would cancel the request's context.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(restoreWork))
	_ = rc.SetWriteDeadline(time.Now().Add(restoreWork))
	path := f.Name()
	if !s.node.IsLeader() {
		// Refused here, a damaged backup costs the leader nothing.
		if _, err := store.Verify(path); err != nil {
			s.failRestore(w, r, fmt.Errorf("restore: %w", err))
			return
		}
	}
	local := func(w http.ResponseWriter, r *http.Request) { s.restoreHere(w, r, path) }
	c := &leaderCall{local: local, file: f, size: n, until: time.Now().Add(s.cfg.LeaderWait), replay: true}
	s.serveLeader(w, r.WithContext(context.WithValue(r.Context(), keyCall, c)), c)
}

// restoreHere restores the backup at path on this node, the leader.
func (s *Server) restoreHere(w http.ResponseWriter, r *http.Request, path string) {
	info, err := s.node.RestoreFile(r.Context(), path)
	if err != nil {
		s.failRestore(w, r, err)
		return
	}
	s.logger.Info("restored a backup", "jobs", info.Jobs, "bytes", info.Size, "backup_index", info.Applied, "index", info.Index)
	writeJSON(w, http.StatusOK, wire.Restore{Jobs: info.Jobs, Bytes: info.Size, BackupIndex: info.Applied, Index: info.Index})
}

// failRestore answers a restore that failed.
func (s *Server) failRestore(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrDamaged):
		writeError(w, wire.CodeBadBackup, "not restored, nothing was changed: the backup is "+
			strings.TrimPrefix(strings.TrimPrefix(err.Error(), "restore: "), "store: "))
	case errors.Is(err, raftnode.ErrUnknownOutcome):
		writeError(w, wire.CodeOutcomeUnknown,
			"the restore may or may not have been done; restoring the same backup again is safe")
	default:
		s.fail(w, r, err)
	}
}

// restoreTooLarge is the reply to a backup over MaxRestoreBytes.
func restoreTooLarge(limit int64) error {
	return refuse(wire.CodeTooLarge, "a backup of more than %d bytes; nothing was done", limit)
}

// receiveBackup streams the request's body into a new file in the data
// directory (raftnode.Node.NewRestoreFile) and returns the file, open, and
// its length. It writes at most MaxRestoreBytes, and refuses a body the
// disk has no room for (leaving restoreDiskReserve free): before it reads
// any of it when Content-Length says so, else as it writes. On error the
// file is removed.
func (s *Server) receiveBackup(w http.ResponseWriter, r *http.Request) (*os.File, int64, error) {
	f, err := s.node.NewRestoreFile()
	if err != nil {
		return nil, 0, err
	}
	dir := filepath.Dir(f.Name())
	room := func(need int64) error {
		free, ok := s.diskFree(dir)
		if !ok || free >= uint64(need)+restoreDiskReserve {
			return nil
		}
		if need == 0 {
			return refuse(wire.CodeTooLarge, "this node's data directory has %d bytes free, less than the %d a restore leaves: nothing was done",
				free, restoreDiskReserve)
		}
		return refuse(wire.CodeTooLarge, "this node's data directory has %d bytes free; the backup (%d bytes) would leave it less than %d: nothing was done",
			free, need, restoreDiskReserve)
	}
	rc := http.NewResponseController(w)
	var extended time.Time
	extend := func() {
		if now := time.Now(); now.Sub(extended) >= time.Second {
			extended = now
			// Not every ResponseWriter has deadlines (ErrNotSupported).
			_ = rc.SetReadDeadline(now.Add(restoreStall))
			_ = rc.SetWriteDeadline(now.Add(restoreStall))
		}
	}
	n, err := int64(0), room(max(r.ContentLength, 0))
	if err == nil {
		n, err = copyBackup(f, http.MaxBytesReader(w, r.Body, s.cfg.MaxRestoreBytes), make([]byte, restoreBuffer), extend, room)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return nil, 0, restoreTooLarge(tooBig.Limit)
		case errors.Is(err, syscall.ENOSPC):
			return nil, 0, refuse(wire.CodeTooLarge, "this node's data directory ran out of room for the backup: nothing was done")
		case errors.Is(err, errReadBody):
			return nil, 0, &badRequest{reason: err.Error()}
		}
		return nil, 0, fmt.Errorf("restore: receive backup: %w", err)
	}
	return f, n, nil
}

// errReadBody wraps a failure to read a restore's body.
var errReadBody = errors.New("reading request body")

// copyBackup copies src to dst through buf, calling tick before each read
// and room(0) every restoreDiskCheck bytes written, and returns the bytes
// written. A read error comes back wrapping errReadBody (and the
// *http.MaxBytesError of a body over its limit).
func copyBackup(dst io.Writer, src io.Reader, buf []byte, tick func(), room func(int64) error) (int64, error) {
	var written, checked int64
	for {
		tick()
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, err := dst.Write(buf[:nr])
			written += int64(nw)
			if err != nil {
				return written, err
			}
			if written-checked >= restoreDiskCheck {
				checked = written
				if err := room(0); err != nil {
					return written, err
				}
			}
		}
		switch {
		case rerr == io.EOF:
			return written, nil
		case rerr != nil:
			return written, fmt.Errorf("%w: %w", errReadBody, rerr)
		}
	}
}
