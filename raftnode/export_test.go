package raftnode

import (
	"os"
)

// RestoreCheckedFile restores the state file at path as Raft installs a
// snapshot (restoreChecked), with before (if not nil) run before each
// background page check from now on reads, given its stop channel. Tests
// call it on a lone node with nothing proposed meanwhile.
func (n *Node) RestoreCheckedFile(path string, before func(stop <-chan struct{})) error {
	n.checkMu.Lock()
	n.beforeCheck = before
	n.checkMu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return n.restoreChecked(f)
}
