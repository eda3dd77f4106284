package raftnode_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// TestRestoreFile: a backup received into a file of NewRestoreFile, in the
// data directory, is restored from there; a file that is not a backup is
// refused; files a crash left behind are removed when the node starts.
func TestRestoreFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "restore-upload-123.db")
	if err := os.WriteFile(crashed, []byte("half a backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := raftnode.Open(loneConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Errorf("a received file a crash left is still there: %v", err)
	}
	waitFor(t, 10*time.Second, leads(n))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	f, err := n.NewRestoreFile()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	if filepath.Dir(f.Name()) != dir {
		t.Errorf("received into %s, not the data directory %s", f.Name(), dir)
	}
	if _, err := f.WriteString("not a backup"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.RestoreFile(ctx, f.Name()); !errors.Is(err, store.ErrDamaged) {
		t.Errorf("RestoreFile of a file that is not a backup = %v, want ErrDamaged", err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WriteBackup(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := n.RestoreFile(ctx, f.Name()); err != nil {
		t.Fatalf("RestoreFile of a backup: %v", err)
	}
}
