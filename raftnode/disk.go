package raftnode

import (
	"io/fs"
	"path/filepath"
)

// DiskUsage is what a node's data directory holds, in bytes.
type DiskUsage struct {
	// DataDir is the directory (Config.DataDir).
	DataDir string
	// StateBytes is the state file's size (state.db); StateInUseBytes what
	// its pages hold, the rest being free pages bbolt reuses and only
	// `workron store compact` gives back to the disk.
	StateBytes, StateInUseBytes int64
	// LogBytes is the Raft log's file (raft.db), SnapshotBytes every file
	// under snapshots/ (the retained snapshots and one being written).
	LogBytes, SnapshotBytes int64
}

// DiskUsage measures the data directory: a stat of each file, and bbolt's
// free page count. A file it cannot read counts as 0.
func (n *Node) DiskUsage() DiskUsage {
	u := DiskUsage{DataDir: n.cfg.DataDir}
	if sz, err := n.fsm.StoreSize(); err == nil {
		u.StateBytes, u.StateInUseBytes = sz.FileBytes, sz.InUseBytes
	}
	u.LogBytes = treeBytes(filepath.Join(n.cfg.DataDir, "raft.db"))
	u.SnapshotBytes = treeBytes(filepath.Join(n.cfg.DataDir, "snapshots"))
	return u
}

// treeBytes is the size of a file, or of the files under a directory.
func treeBytes(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile (a snapshot reaped): skip it
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
