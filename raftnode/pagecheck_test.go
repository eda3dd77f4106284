package raftnode_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// TestBackgroundPageCheckStopsADamagedNode: a state file closed cleanly
// is opened at once and its pages checked in the background; damage there
// (here a page of the idempotency keys, which nothing reads at start)
// stops the node through OnFatal, its marker saying so, and the next start
// checks the file first, sets it aside and rebuilds it from the log.
func TestBackgroundPageCheckStopsADamagedNode(t *testing.T) {
	cfg, dir := keyedNodeStopped(t)
	statePath := filepath.Join(dir, "state.db")
	damageIdemPage(t, statePath)
	if _, err := store.VerifyPages(statePath); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("VerifyPages of the planted damage = %v, want ErrDamaged", err)
	}

	stopped := make(chan error, 1)
	cfg.OnFatal = func(err error) { stopped <- err }
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	waitStoppedDamaged(t, n, stopped, statePath)

	cfg.OnFatal = nil
	n = reopenSetAside(t, cfg, statePath)
	defer n.Shutdown()
	waitFor(t, 10*time.Second, func() error {
		if _, err := n.FSM().Job("job-40"); err != nil {
			return fmt.Errorf("job-40 after the rebuild: %w", err)
		}
		return nil
	})
}

// TestBackgroundPageCheckPasses: a sound file's background check removes
// its marker, and the node serves meanwhile.
func TestBackgroundPageCheckPasses(t *testing.T) {
	cfg, dir := keyedNodeStopped(t)
	marker := filepath.Join(dir, "state.db.unchecked")
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new file's start left a check marker: %v", err)
	}
	cfg.OnFatal = func(err error) { t.Errorf("OnFatal(%v) on a sound file", err) }
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	waitFor(t, 10*time.Second, func() error {
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("check marker still there: %v", err)
		}
		return nil
	})
	if _, err := n.FSM().Job("job-40"); err != nil {
		t.Fatal(err)
	}
}

// waitStoppedDamaged waits for the background page check to give OnFatal
// (which sends to fatal) a DamagedStateError, shuts n down, and checks that
// the check's marker says damaged.
func waitStoppedDamaged(t *testing.T, n *raftnode.Node, fatal <-chan error, statePath string) {
	t.Helper()
	select {
	case err := <-fatal:
		var de *raftnode.DamagedStateError
		if !errors.As(err, &de) || !errors.Is(err, store.ErrDamaged) {
			t.Fatalf("OnFatal(%v), want a DamagedStateError wrapping ErrDamaged", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the background check did not stop the node")
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if m, err := os.ReadFile(statePath + ".unchecked"); err != nil || !strings.HasPrefix(string(m), "damaged") {
		t.Fatalf("check marker %q (%v), want it to say damaged", m, err)
	}
}

// keyedNodeStopped runs a lone node that takes 40 jobs with idempotency
// keys (submitKeyed), stops it cleanly, and returns its config and data
// directory.
func keyedNodeStopped(t *testing.T) (raftnode.Config, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "n1")
	cfg := loneConfig(dir)
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, leads(n))
	submitKeyed(t, n, 40)
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return cfg, dir
}

// submitKeyed submits n jobs with long idempotency keys, so that the
// idempotency bucket has a page of its own.
func submitKeyed(t *testing.T, n *raftnode.Node, jobs int) {
	t.Helper()
	var nj []fsm.NewJob
	for i := range jobs {
		nj = append(nj, fsm.NewJob{Command: "true", IdempotencyKey: fmt.Sprintf("%03d-%s", i, strings.Repeat("k", 100))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Propose(ctx, fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: nj}}); err != nil {
		t.Fatal(err)
	}
}

// damageIdemPage points the first element of a leaf page of the
// idempotency bucket outside its page: the page check finds it, and bbolt,
// which reads that page only to look a key up, does not trip over it at
// start.
func damageIdemPage(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	if err := db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("idem")).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pageSize := int64(db.Info().PageSize)
	db.Close()
	if root == 0 {
		t.Fatal("the idempotency bucket is inline: submit more keys")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, pageSize)
	for {
		if _, err := f.ReadAt(page, int64(root)*pageSize); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint16(page[8:]) != 0x01 { // not a branch page
			break
		}
		root = binary.LittleEndian.Uint64(page[16+8:]) // its first child
	}
	binary.LittleEndian.PutUint32(page[16+4:], uint32(pageSize*4)) // element 0's pos
	if _, err := f.WriteAt(page, int64(root)*pageSize); err != nil {
		t.Fatal(err)
	}
}
