package raftnode_test

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/raftnode"
)

// TestUpgradeReadsTheOldDataDirectory: a node upgraded from a build on
// hashicorp/raft v1.7.3 (Workron's copy in third_party/raft, raft-boltdb/v2
// v2.3.1 for raft.db) reads the Raft log and the snapshot that build wrote.
// testdata/datadir-raft-v1.7.3.tar.gz is that build's data directory for a
// lone node "n1" that registered workers w00-w09, took a snapshot, then
// registered w10-w14 (its raft.db and snapshots/, without state.db, so the
// state must come back from the snapshot and the log).
func TestUpgradeReadsTheOldDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	untar(t, "testdata/datadir-raft-v1.7.3.tar.gz", dir)

	n, err := raftnode.Open(loneConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	waitFor(t, 10*time.Second, leads(n))
	waitRebuilt(t, n, 15)
	if s := n.Stats().Snapshot; s.Index != 13 {
		t.Errorf("the newest snapshot is at index %d, want the old one's, 13", s.Index)
	}
	register(t, n, "w15")
	if err := n.Snapshot(); err != nil {
		t.Fatalf("a snapshot beside the old one: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	// And what the new build wrote reads back.
	n, err = raftnode.Open(loneConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	waitFor(t, 10*time.Second, leads(n))
	waitRebuilt(t, n, 16)
}

// untar unpacks a gzipped tar of regular files and directories into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFrom(path, tr)
		default:
			err = fmt.Errorf("%s: not a file or a directory", h.Name)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFrom(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
