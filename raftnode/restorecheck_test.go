package raftnode_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/raftnode"
)

// TestRestoredStateFileIsChecked: a state file installed from a snapshot
// (whose CRC matched, so only the pages opening it reads were checked
// before it replaced the old one) has its pages checked in the background,
// with the same marker and outcomes as a start's background check.
func TestRestoredStateFileIsChecked(t *testing.T) {
	// setup runs a lone node on a cleanly stopped data directory, waits for
	// its start's background check to pass, and returns it with its state
	// file's path, a copy of that file as it was stopped (a snapshot's
	// state file to restore) and what OnFatal is given.
	setup := func(t *testing.T) (n *raftnode.Node, statePath, src string, fatal chan error) {
		t.Helper()
		cfg, dir := keyedNodeStopped(t)
		statePath = filepath.Join(dir, "state.db")
		src = filepath.Join(t.TempDir(), "snapshot.db")
		copyStateFile(t, statePath, src)
		fatal = make(chan error, 4)
		cfg.OnFatal = func(err error) { fatal <- err }
		n, err := raftnode.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Shutdown() })
		waitMarkerGone(t, statePath)
		return n, statePath, src, fatal
	}
	noFatal := func(t *testing.T, fatal chan error) {
		t.Helper()
		select {
		case err := <-fatal:
			t.Fatalf("OnFatal(%v) on a sound file", err)
		default:
		}
	}

	t.Run("TheCheckRunsAfterTheRestoreAndRemovesItsMarker", func(t *testing.T) {
		n, statePath, src, fatal := setup(t)
		ran := make(chan string, 1)
		err := n.RestoreCheckedFile(src, func(<-chan struct{}) {
			m, _ := os.ReadFile(statePath + ".unchecked")
			ran <- string(m)
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-ran:
			if m != "running" {
				t.Fatalf("marker while the check runs = %q, want running", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no page check ran after the restore")
		}
		waitMarkerGone(t, statePath)
		noFatal(t, fatal)
	})

	t.Run("DamageInTheInstalledFileStopsTheNode", func(t *testing.T) {
		n, statePath, src, fatal := setup(t)
		damageIdemPage(t, src)
		if err := n.RestoreCheckedFile(src, nil); err != nil {
			t.Fatalf("restore of a file damaged past the pages opening it reads: %v", err)
		}
		waitStoppedDamaged(t, n, fatal, statePath)
	})

	t.Run("AShutdownMidCheckLeavesItStopped", func(t *testing.T) {
		n, statePath, src, fatal := setup(t)
		// The check ends late after the stop: Shutdown must wait for it.
		slow := func(stop <-chan struct{}) { <-stop; time.Sleep(300 * time.Millisecond) }
		if err := n.RestoreCheckedFile(src, slow); err != nil {
			t.Fatal(err)
		}
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if m, err := os.ReadFile(statePath + ".unchecked"); err != nil || string(m) != "stopped" {
			t.Fatalf("check marker %q (%v), want stopped", m, err)
		}
		noFatal(t, fatal)
	})

	t.Run("ARestoreMidCheckEndsItAndChecksTheNewFile", func(t *testing.T) {
		n, statePath, src, fatal := setup(t)
		damaged := filepath.Join(t.TempDir(), "damaged.db")
		copyStateFile(t, src, damaged)
		damageIdemPage(t, damaged)
		first := make(chan struct{})
		// The damaged file's check waits to be ended.
		wait := func(stop <-chan struct{}) { <-stop; close(first) }
		if err := n.RestoreCheckedFile(damaged, wait); err != nil {
			t.Fatal(err)
		}
		if err := n.RestoreCheckedFile(src, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			t.Fatal("the second restore did not end the check of the file it replaced")
		}
		waitMarkerGone(t, statePath)
		noFatal(t, fatal)
	})
}

func copyStateFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func waitMarkerGone(t *testing.T, statePath string) {
	t.Helper()
	waitFor(t, 10*time.Second, func() error {
		if _, err := os.Stat(statePath + ".unchecked"); !errors.Is(err, os.ErrNotExist) {
			return errors.New("check marker still there")
		}
		return nil
	})
}
