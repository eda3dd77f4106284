package raftnode

import (
	"errors"
	"log/slog"
	"syscall"

	"github.com/workron/workron/store"
)

// fatalExit is Config.OnFatal's default: one ERROR line that says why the
// node stops and what to do, then exit(1). A node whose state file cannot
// take committed entries cannot skip them (the replicas would diverge) nor
// go on (its indexes would disagree with the file), so it stops; its Raft
// log and state file are as of the last batch it wrote, and started again
// once the disk has room it applies the log from there. The other members
// go on meanwhile. The same path stops a node whose background page check
// found its state file damaged (checkInBackground).
func fatalExit(logger *slog.Logger, dataDir string, exit func(code int)) func(error) {
	return func(err error) {
		msg := "stopping: this node cannot write its state file, so it cannot apply committed log entries"
		next := "free space on that disk (or replace it) and start the node again: it applies the log from where it stopped"
		switch {
		case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
			msg = "stopping: the disk holding the data directory is full, so this node cannot apply committed log entries"
		case errors.Is(err, store.ErrDamaged):
			msg = "stopping: the background page check found the state file damaged"
			next = "start the node again: it checks the file first, moves it aside and rebuilds the state from its snapshot and Raft log (check the disk)"
		}
		logger.Error(msg, "data_dir", dataDir, "err", err, "next", next)
		exit(1)
	}
}
