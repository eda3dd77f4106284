package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/store"
)

// stagedRestoreFile is the backup `workron restore --data` stages in a new
// node's data directory; the node restores it through Raft once it leads
// (see StageRestore).
const stagedRestoreFile = "restore-pending.db"

// RestoreInfo describes a restore that was done.
type RestoreInfo struct {
	store.Info
	// Index is the Raft index the restored state stands at: above the
	// cluster's last index and the backup's applied index, so every later
	// entry, and every fencing token, is above anything in the backup.
	Index uint64
}

// restoreUploadPattern names the files a backup is received into
// (NewRestoreFile, Restore); any left by a crash go when the node starts.
const restoreUploadPattern = "restore-upload-*.db"

// Restore replaces the whole cluster's state with the backup read from r,
// through Raft: it copies r into the data directory and restores that file
// (RestoreFile). Leader only (ErrNotLeader), checked before r is read.
func (n *Node) Restore(ctx context.Context, r io.Reader) (RestoreInfo, error) {
	if !n.IsLeader() {
		return RestoreInfo{}, ErrNotLeader
	}
	f, err := n.NewRestoreFile()
	if err != nil {
		return RestoreInfo{}, err
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return RestoreInfo{}, fmt.Errorf("restore: receive backup: %w", err)
	}
	return n.RestoreFile(ctx, f.Name())
}

// NewRestoreFile creates an empty file in the data directory to receive a
// backup into for RestoreFile: on the disk the restored state will take.
// The caller closes and removes it; files left by a crash are removed when
// the node next starts.
func (n *Node) NewRestoreFile() (*os.File, error) {
	f, err := os.CreateTemp(n.cfg.DataDir, restoreUploadPattern)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	return f, nil
}

// RestoreFile replaces the whole cluster's state with the backup in the
// file at path, through Raft: the leader installs it as a snapshot at an
// index past its log and the backup's, and each follower receives that
// snapshot, as does every node that joins later. The backup is verified
// first (store.Verify); one that is not whole gives an error wrapping
// store.ErrDamaged and changes nothing. The cluster's members and their
// addresses stay as they are: they are written into the file, which the
// caller then removes. Leader only (ErrNotLeader, the file unchanged). The
// call returns once a quorum holds the restored state; on
// ErrUnknownOutcome it may have been restored.
func (n *Node) RestoreFile(ctx context.Context, path string) (RestoreInfo, error) {
	if !n.IsLeader() {
		return RestoreInfo{}, ErrNotLeader
	}
	info, err := n.restoreFile(ctx, path)
	if err != nil {
		return info, err
	}
	// The leader's loops read state the restore replaced: start them over,
	// as after an election (the reaper waits a lease period again).
	select {
	case n.restored <- struct{}{}:
	default:
	}
	return info, nil
}

// removeRestoreFiles removes the files backups were received into that a
// crash left in the data directory.
func removeRestoreFiles(dataDir string) {
	left, _ := filepath.Glob(filepath.Join(dataDir, restoreUploadPattern))
	for _, p := range left {
		_ = os.Remove(p)
	}
}

// restoreFile verifies the backup at path, makes its member list this
// cluster's and hands it to Raft's user restore. path is changed.
func (n *Node) restoreFile(ctx context.Context, path string) (RestoreInfo, error) {
	info, err := store.Verify(path)
	if err != nil {
		return RestoreInfo{Info: info}, fmt.Errorf("restore: %w", err)
	}
	nodes, err := n.fsm.Nodes()
	if err != nil {
		return RestoreInfo{Info: info}, fmt.Errorf("restore: read members: %w", err)
	}
	if err := store.PrepareRestore(path, nodes); err != nil {
		return RestoreInfo{Info: info}, fmt.Errorf("restore: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return RestoreInfo{Info: info}, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return RestoreInfo{Info: info}, fmt.Errorf("restore: %w", err)
	}
	timeout := n.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	n.restoreMu.Lock()
	defer n.restoreMu.Unlock()
	select {
	case <-n.shutdownCh: // Raft stops once this lock is free; see Shutdown
		return RestoreInfo{Info: info}, fmt.Errorf("restore: %w", ErrShutdown)
	default:
	}
	// Raft puts the snapshot at max(its last index, meta.Index) + 1 and
	// leaves that index out of its log, so a follower asking for it gets
	// the snapshot. Index above the backup's applied index keeps the FSM
	// applying what follows (it skips indexes it has applied), and above
	// every fencing token the backup handed out (NextLease).
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: max(info.Applied, info.LastLease), Size: fi.Size()}
	if err := n.raft.Restore(meta, f, timeout); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			return RestoreInfo{Info: info}, fmt.Errorf("restore: %w: %w", ErrUnknownOutcome, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return RestoreInfo{Info: info}, fmt.Errorf("restore: %w", ErrShutdown)
		}
		return RestoreInfo{Info: info}, fmt.Errorf("restore: %w: %w", ErrUnknownOutcome, err)
	}
	out := RestoreInfo{Info: info}
	if metas, err := n.snaps.List(); err == nil && len(metas) > 0 {
		out.Index = metas[0].Index
	}
	n.clock.resync(n.fsm.LastNow())
	n.logger.Info("restored a backup", "jobs", info.Jobs, "backup_index", info.Applied, "index", out.Index)
	return out, nil
}

// StageRestore readies a new node's data directory to restore a backup
// when it starts: the node, started with Bootstrap, forms a one-node
// cluster and restores the backup through Raft as soon as it leads, so the
// nodes that join it receive the restored state. The backup is verified
// before anything is written (an error wrapping store.ErrDamaged if it is not
// whole), and dataDir must not exist or be empty.
func StageRestore(dataDir, backup string) (store.Info, error) {
	if entries, err := os.ReadDir(dataDir); err == nil && len(entries) > 0 {
		return store.Info{}, fmt.Errorf("stage restore: %s is not empty; restore seeds a new node only", dataDir)
	}
	info, err := store.Verify(backup)
	if err != nil {
		return info, fmt.Errorf("stage restore: %w", err)
	}
	in, err := os.Open(backup)
	if err != nil {
		return info, fmt.Errorf("stage restore: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return info, fmt.Errorf("stage restore: %w", err)
	}
	tmp := filepath.Join(dataDir, stagedRestoreFile+".tmp")
	err = copyFile(tmp, in)
	if err == nil {
		// The copy is what will be restored: check it, not just the source.
		_, err = store.Verify(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dataDir, stagedRestoreFile))
	}
	if err != nil {
		os.Remove(tmp)
		return info, fmt.Errorf("stage restore: %w", err)
	}
	_ = syncDir(dataDir)
	return info, nil
}

// runStagedRestore restores a backup StageRestore left in the data
// directory, once this node leads; the file goes once the restore is done.
// A failure is logged and the file kept, to be tried again at the next
// leadership. Between a restore and the file's removal a crash would have
// the next leadership restore it again; the window is one unlink.
func (n *Node) runStagedRestore() {
	path := filepath.Join(n.cfg.DataDir, stagedRestoreFile)
	if _, err := os.Stat(path); err != nil {
		return
	}
	work := path + ".work" // restoreFile changes its file; keep the staged one
	in, err := os.Open(path)
	if err == nil {
		err = copyFile(work, in)
		in.Close()
	}
	defer os.Remove(work)
	if err == nil {
		err = n.restoreStaged(work)
	}
	if err != nil {
		n.logger.Error("restoring the staged backup failed; it is tried again when this node next leads", "file", path, "err", err)
		return
	}
	if err := os.Remove(path); err != nil {
		n.logger.Error("remove the staged backup after restoring it", "file", path, "err", err)
	}
	_ = syncDir(n.cfg.DataDir)
}

// restoreStaged restores the file at path, trying again while this node
// leads: Raft refuses a restore until the newest configuration entry is
// applied, and nodes joining a node that just bootstrapped add such entries
// in its first moments as leader. A backup that fails verification is not
// tried again.
func (n *Node) restoreStaged(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*n.cfg.ApplyTimeout)
	defer cancel()
	for {
		_, err := n.restoreFile(ctx, path)
		if err == nil || errors.Is(err, store.ErrDamaged) || n.raft.State() != raft.Leader {
			return err
		}
		n.logger.Info("restoring the staged backup: trying again", "err", err)
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// hasStagedRestore reports whether the data directory holds a backup
// staged by StageRestore.
func hasStagedRestore(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, stagedRestoreFile))
	return err == nil
}

// copyFile writes r to path and fsyncs it.
func copyFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs a directory so renames and removals in it last. Most
// callers go on without it on an error; a snapshot's Close fails.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// restoredIndex is the index of the newest snapshot the FSM restored in
// this process (0 before any): a snapshot a leader sent, a backup restored
// through Raft, or the one a start caught up from.
type restoredIndex struct {
	snaps raft.SnapshotStore
	v     atomic.Uint64
}

// newest records the newest snapshot's index, which is the one just
// restored: Raft stores a snapshot before it hands it to the FSM.
func (r *restoredIndex) newest() {
	if metas, err := r.snaps.List(); err == nil && len(metas) > 0 {
		r.v.Store(metas[0].Index)
	}
}

// AppliedIndex is the Raft index this node's state stands at. That is the
// last entry its FSM applied, or higher in two cases the FSM's own index
// does not see: the index of the snapshot it last restored (a restored
// backup keeps its own applied index, below the index Raft gives its
// snapshot, see Restore), and entries Raft applied that never reach the
// FSM and change nothing (the no-op a leader writes when elected or after
// a restore, barriers), read from the log up to maxSkipped of them. Without
// these, a cluster that writes nothing after an election or a restore would
// show its state behind the commit index for good.
func (n *Node) AppliedIndex() uint64 {
	return n.quietThrough(max(n.fsm.Applied(), n.snapRestored.v.Load()), n.raft.AppliedIndex())
}

// quietThrough is the highest index, from a up to to, that the state at a
// stands at too: the entries after a that the log holds up to it never
// reach the FSM and change nothing (no-ops, barriers). It reads at most
// maxSkipped entries, and stops at one the FSM applies or the log no
// longer holds.
func (n *Node) quietThrough(a, to uint64) uint64 {
	for i := 0; a < to && i < maxSkipped; i++ {
		var l raft.Log
		if err := n.logStore.GetLog(a+1, &l); err != nil || (l.Type != raft.LogNoop && l.Type != raft.LogBarrier) {
			break // the FSM has an entry to apply yet (or the log no longer holds it)
		}
		a++
	}
	return a
}

// maxSkipped bounds the log reads of AppliedIndex.
const maxSkipped = 16
