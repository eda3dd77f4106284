package raftnode

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/workron/workron/store"
)

// The page check of a state file a restore installed, and the one
// background page check a node runs at a time.

// bgCheck is a page check running in the background (checkInBackground).
type bgCheck struct {
	before     func(stop <-chan struct{}) // Node.beforeCheck when it started
	superseded chan struct{}              // closed when a restore replaces the file it reads
	done       chan struct{}              // closed when it has ended and settled its marker
}

// restoreChecked restores a snapshot that rc reads from this node's
// snapshot store (snapshotStore.Open), the only source hashicorp/raft hands
// FSM.Restore (installing a leader's snapshot, a user's restore, a start)
// and the one catchUpFromSnapshot opens. Its reader fails unless the state
// file matched its CRC whole, so the FSM checks, before the file replaces
// the old one, only the pages opening it reads (fsm.FSM.RestoreChecked); a
// backup restored through Raft was verified in full before (Node.Restore).
// What the CRC cannot show is damage in the file the snapshot was taken
// of, so the installed file's pages are then checked in the background
// like a start's (checkInBackground): its marker is written, synced,
// before the restore, so a crash before the check ends makes the next
// start check first. A check still running on the file replaced ends
// without a say (its file is gone). On error the old state stays; the
// marker is removed unless the old file's own check had not passed.
// Callers do not write to the state meanwhile (Raft's FSM goroutine, or
// a start before Raft runs): the check is taken of the file as restored.
func (n *Node) restoreChecked(rc io.ReadCloser) error {
	path := n.state.Path()
	marker := checkMarker(path)
	ended := n.supersedeCheck() // first: it may remove the marker
	_, serr := os.Stat(marker)
	unchecked := ended || serr == nil
	if err := writeSynced(marker, checkRunning); err != nil {
		rc.Close()
		return fmt.Errorf("restore: %w", err)
	}
	start := time.Now()
	tr := &timedReader{ReadCloser: rc}
	if err := n.fsm.RestoreChecked(tr); err != nil {
		if !unchecked {
			os.Remove(marker)
		}
		return err
	}
	n.logger.Info("installed a snapshot as the state file", "bytes", tr.n,
		"read_took", tr.ended.Sub(start).Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	pc, err := n.state.NewPageCheck()
	if err != nil {
		n.logger.Warn("cannot check the restored state file's pages in the background; the next start checks them first", "err", err)
		return nil
	}
	n.logger.Info("checking the restored state file's pages in the background")
	n.startCheck(path, pc)
	return nil
}

// supersedeCheck ends the background page check, running or yet to start,
// of the file a restore is about to replace, and waits for it. It reports
// whether that check had not passed.
func (n *Node) supersedeCheck() bool {
	n.checkMu.Lock()
	c, pending := n.check, n.pageCheck
	n.check, n.pageCheck = nil, nil
	n.checkMu.Unlock()
	if pending != nil {
		pending.Close()
		return true
	}
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return false // it passed, or its marker says why not
	default:
	}
	close(c.superseded)
	<-c.done
	return true
}

// startCheck runs pc in the background, or, before Open has started the
// node's checks (startChecks), keeps it for then.
func (n *Node) startCheck(path string, pc *store.PageCheck) {
	n.checkMu.Lock()
	defer n.checkMu.Unlock()
	if !n.checksLive {
		n.pageCheck = pc
		return
	}
	c := &bgCheck{before: n.beforeCheck, superseded: make(chan struct{}), done: make(chan struct{})}
	n.check = c
	go n.checkInBackground(path, pc, c)
}

// startChecks starts the page check openState or a restore at start left
// to run once serving, and any later one at once.
func (n *Node) startChecks() {
	n.checkMu.Lock()
	pc := n.pageCheck
	n.pageCheck, n.checksLive = nil, true
	n.checkMu.Unlock()
	if pc != nil {
		n.startCheck(n.state.Path(), pc)
	}
}

// waitCheck waits for the background page check, if one runs. Shutdown
// calls it once Raft has stopped, so no restore starts another.
func (n *Node) waitCheck() {
	n.checkMu.Lock()
	c := n.check
	n.checkMu.Unlock()
	if c != nil {
		<-c.done
	}
}

// checkStop is closed when c must end early: the node shuts down, or a
// restore replaced the file. It is released when c ends (finished).
func (n *Node) checkStop(c *bgCheck, finished <-chan struct{}) <-chan struct{} {
	stop := make(chan struct{})
	go func() {
		select {
		case <-n.shutdownCh:
		case <-c.superseded:
		case <-finished:
		}
		close(stop)
	}()
	return stop
}

// timedReader notes what was read through it, and when: a restore's log
// line splits its time into the copy (reading the snapshot, bound by
// writing it) and what follows (the last flush, the check, the rebuild of
// the indexes). BenchmarkJoin reads the same fields.
type timedReader struct {
	io.ReadCloser
	n            int64         // bytes read
	in           time.Duration // spent in Read
	first, ended time.Time     // when the first read began and the last ended
}

func (t *timedReader) Read(p []byte) (int, error) {
	start := time.Now()
	if t.first.IsZero() {
		t.first = start
	}
	k, err := t.ReadCloser.Read(p)
	t.ended = time.Now()
	t.n += int64(k)
	t.in += t.ended.Sub(start)
	return k, err
}
