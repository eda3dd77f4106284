package raftnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/workron/workron/store"
)

// The state file: opening it, the marker of an unclean close, and setting
// a damaged one aside to be rebuilt from the snapshot and the log.

// dirtyMarker names the file that exists while an unsynced state file is
// open; finding it at start means the last run did not close cleanly.
func dirtyMarker(statePath string) string { return statePath + ".open" }

// openState opens the state file. Without StateFsync, a file that a crash
// left open (its marker is still there) is trusted only if the machine has
// not rebooted since: after a process crash the kernel still holds every
// page it was given. After a reboot nothing says those pages reached the
// disk, and bbolt cannot check a damaged file without crashing, so the file
// is removed and the state rebuilt from the newest snapshot and the Raft
// log, which are fsync'd; see catchUpFromSnapshot.
func (n *Node) openState(path string) (*store.Store, error) {
	opts := store.Options{NoSync: !n.cfg.StateFsync}
	if !opts.NoSync {
		if err := n.setAsideDamagedState(path); err != nil {
			return nil, err
		}
		return store.Open(path, opts)
	}
	marker := dirtyMarker(path)
	boot := bootID()
	if was, err := os.ReadFile(marker); err == nil && (boot == "" || string(was) != boot) {
		if _, err := os.Stat(path); err == nil {
			n.logger.Warn("state file was left open before a reboot (or by another machine); rebuilding it from the snapshot and the Raft log")
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("remove unsynced state file: %w", err)
			}
		}
	}
	if err := n.setAsideDamagedState(path); err != nil {
		return nil, err
	}
	st, err := store.Open(path, opts)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(marker, []byte(boot), 0o600); err != nil {
		st.Close()
		return nil, fmt.Errorf("write %s: %w", marker, err)
	}
	return st, nil
}

// setAsideDamagedState checks the state file, if there is one, with
// store.VerifyPages (the full store.Verify would add seconds to the start of
// a node holding a million jobs; a record that does not decode is found when
// the FSM loads, and handled the same way). A damaged one is renamed to state.db.damaged (replacing an
// older one) and the state is rebuilt, like a lost one, from the newest
// snapshot and the Raft log: they hold every committed entry, and a state
// file is only ever a cache of applying them. Opening a damaged file would
// crash bbolt, at start or later.
func (n *Node) setAsideDamagedState(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_, err := store.VerifyPages(path)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrDamaged) {
		return fmt.Errorf("check state file: %w", err)
	}
	return n.setAside(path, err)
}

// setAside renames a damaged state file to state.db.damaged, so the state
// is rebuilt from the snapshot and the log; why says what is wrong.
func (n *Node) setAside(path string, why error) error {
	err := why
	aside := path + ".damaged"
	if rerr := os.Rename(path, aside); rerr != nil {
		return fmt.Errorf("state file is damaged (%w), and moving it aside failed: %w; "+
			"remove it by hand and start again: the node rebuilds it from its snapshot and Raft log", err, rerr)
	}
	syncDir(filepath.Dir(path))
	n.logger.Warn("state file is damaged; moved it aside and rebuilding the state from the snapshot and the Raft log",
		"err", err, "moved_to", aside)
	return nil
}

// bootID names this boot of the machine ("" where the kernel does not say).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
