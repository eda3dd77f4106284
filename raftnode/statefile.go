package raftnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/workron/workron/store"
)

// The state file: opening it, the marker of an unclean close, when its
// pages are checked, and setting a damaged one aside to be rebuilt from the
// snapshot and the log.

// The values of Config.StateCheck.
const (
	StateCheckAuto  = "auto"
	StateCheckStart = "start"
)

// dirtyMarker names the file that exists while a state file is open;
// finding it at start means the last run did not close cleanly. It holds
// the boot id of the machine that opened the file.
func dirtyMarker(statePath string) string { return statePath + ".open" }

// checkMarker names the file that exists while the state file in use has
// not passed the page check since it was opened without one: written
// before a start that checks in the background opens the file, removed
// when that check passes. It holds what the check came to: checkRunning
// (so a process that died before the check ended, perhaps crashed by bbolt
// on a damaged page, is found at the next start), checkStoppedEarly, or
// why it failed.
func checkMarker(statePath string) string { return statePath + ".unchecked" }

const (
	checkRunning      = "running"
	checkStoppedEarly = "stopped" // a clean stop ended the check before it did
)

// pageCheck is when a start checks the state file's pages, and why.
type pageCheck struct {
	first bool // before the file is opened; else in the background once serving
	why   string
}

// openState opens the state file, first deciding how its pages are
// checked (planCheck), since bbolt cannot read a damaged file without
// crashing. Without StateFsync, a file that a crash left open (its marker
// is still there) is trusted only if the machine has not rebooted since:
// after a process crash the kernel still holds every page it was given.
// After a reboot nothing says those pages reached the disk, so the file is
// removed and the state rebuilt from the newest snapshot and the Raft log,
// which are fsync'd; see catchUpFromSnapshot.
func (n *Node) openState(path string) (*store.Store, error) {
	opts := store.Options{NoSync: !n.cfg.StateFsync}
	marker := dirtyMarker(path)
	boot := bootID()
	was, err := os.ReadFile(marker)
	crashed := err == nil
	rebooted := crashed && (boot == "" || string(was) != boot)
	if rebooted && opts.NoSync {
		if _, err := os.Stat(path); err == nil {
			n.logger.Warn("state file was left open before a reboot (or by another machine); rebuilding it from the snapshot and the Raft log")
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("remove unsynced state file: %w", err)
			}
		}
	}
	later := false
	n.closePageCheck()
	if _, err := os.Stat(path); err == nil {
		plan := n.planCheck(path, crashed, rebooted)
		if !plan.first {
			// The pages opening it reads first (a few): damage there,
			// as a disk damages a whole file, is checked in full now.
			if err := store.QuickCheck(path); err != nil {
				plan = pageCheck{first: true, why: fmt.Sprintf("%s, but the pages a start reads first are not sound (%v)", plan.why, err)}
			}
		}
		if plan.first {
			n.logger.Info("checking the state file's pages before serving", "why", plan.why)
			if err := n.setAsideDamagedState(path); err != nil {
				return nil, err
			}
			os.Remove(checkMarker(path))
		} else {
			n.logger.Info("checking the state file's pages in the background once serving", "why", plan.why)
			if err := writeSynced(checkMarker(path), checkRunning); err != nil {
				return nil, err
			}
			later = true
		}
	} else {
		os.Remove(checkMarker(path)) // a new file: nothing to check
	}
	st, err := store.Open(path, opts)
	if err != nil {
		return nil, err
	}
	if later {
		// Taken now, before anything writes: see store.NewPageCheck.
		pc, err := st.NewPageCheck()
		if err != nil {
			st.Close()
			return nil, err
		}
		n.startCheck(path, pc) // kept until Open starts the checks

	}
	if err := os.WriteFile(marker, []byte(boot), 0o600); err != nil {
		n.closePageCheck()
		st.Close()
		return nil, fmt.Errorf("write %s: %w", marker, err)
	}
	return st, nil
}

// closePageCheck releases a page check that will not run (the start
// failed): the state file cannot close while it holds a snapshot.
func (n *Node) closePageCheck() {
	n.checkMu.Lock()
	defer n.checkMu.Unlock()
	if n.pageCheck != nil {
		n.pageCheck.Close()
		n.pageCheck = nil
	}
}

// planCheck decides when the existing state file at path is checked. A
// full check before serving reads the whole file (at 10,000,000 jobs,
// 6.8 GB: more than a minute with a cold page cache), so it runs only
// where damage is possible or its absence unknown: when asked
// (StateCheckStart), when the last check of this file did not pass or did
// not end (its marker says so), or when the file was left open before a
// reboot (or the boot is unknown). A file closed cleanly, or left open by
// a process crash within this boot (the kernel holds every page it was
// given, and bbolt writes its meta page last), cannot have been damaged by
// that stop; it is checked in the background (checkInBackground), so that
// damage a disk did is still found, and stops the node. openState first
// checks the few pages opening the file reads (store.QuickCheck), and
// checks in full before serving if they are not sound.
func (n *Node) planCheck(path string, crashed, rebooted bool) pageCheck {
	if n.cfg.StateCheck == StateCheckStart {
		return pageCheck{first: true, why: "asked for (--state-check start)"}
	}
	if rebooted {
		return pageCheck{first: true, why: "the file was left open before a reboot, or the boot is unknown"}
	}
	if m, err := os.ReadFile(checkMarker(path)); err == nil {
		if string(m) == checkStoppedEarly {
			return pageCheck{why: "the last run stopped cleanly before its background check ended"}
		}
		return pageCheck{first: true, why: fmt.Sprintf("the last background check of this file did not pass or did not end (%s)", m)}
	}
	switch {
	case crashed:
		return pageCheck{why: "the file was left open by a process that stopped within this boot"}
	}
	return pageCheck{why: "the file was closed cleanly"}
}

// checkInBackground checks the state file's pages while the node serves
// (store.PageCheck, taken when the file was opened or restored), after a
// start that did not check them first or a restore (restoreChecked). A
// damaged file stops the node through the fatal path, its marker saying
// so: the next start checks the file first and sets it aside. A check
// that a shutdown ends early leaves the marker saying so, and the next
// start checks in the background again. A check whose file a restore
// replaced ends without touching the marker: the restore's check has it.
func (n *Node) checkInBackground(path string, pc *store.PageCheck, c *bgCheck) {
	defer close(c.done)
	finished := make(chan struct{})
	defer close(finished)
	stop := n.checkStop(c, finished)
	if c.before != nil {
		c.before(stop)
	}
	start := time.Now()
	var info store.Info
	err := store.ErrCheckStopped
	select {
	case <-stop:
	default:
		info, err = pc.Run(stop)
	}
	pc.Close()
	select {
	case <-c.superseded:
		n.logger.Info("a restore replaced the state file the background page check was reading; the new file is checked instead", "err", err)
		return
	default:
	}
	marker := checkMarker(path)
	switch {
	case err == nil:
		if rerr := os.Remove(marker); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			n.logger.Warn("removing the page check's marker failed; the next start checks the state file first", "err", rerr)
		}
		_ = syncDir(filepath.Dir(path))
		n.logger.Info("state file's pages checked in the background", "bytes", info.Size, "took", time.Since(start).Round(time.Millisecond))
	case errors.Is(err, store.ErrCheckStopped):
		if werr := writeSynced(marker, checkStoppedEarly); werr != nil {
			n.logger.Warn("recording the stopped page check failed; the next start checks the state file first", "err", werr)
		}
		n.logger.Info("stopping before the background page check ended; the next start checks in the background again")
	case errors.Is(err, store.ErrDamaged):
		if werr := writeSynced(marker, "damaged: "+err.Error()); werr != nil {
			n.logger.Warn("recording the damage failed", "err", werr)
		}
		n.onFatal(&DamagedStateError{Path: path, Err: err})
	default:
		// The file could not be read: the marker stays, so the next start
		// checks it before serving.
		n.logger.Error("the background page check could not read the state file; the next start checks it before serving", "err", err)
	}
}

// DamagedStateError is what the background page check gives Config.OnFatal
// when it finds the state file damaged.
type DamagedStateError struct {
	Path string
	Err  error // wraps store.ErrDamaged
}

func (e *DamagedStateError) Error() string {
	return fmt.Sprintf("state file %s is damaged: %v", e.Path, e.Err)
}

func (e *DamagedStateError) Unwrap() error { return e.Err }

// writeSynced writes a small marker file and fsyncs it and its directory,
// so that it survives a reboot.
func writeSynced(path, content string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_ = syncDir(filepath.Dir(path))
	return nil
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
	_ = syncDir(filepath.Dir(path))
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
