package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// TestStateFileDamagedByACrashIsRebuilt: the state file is not fsync'd by
// default, so a crash (power loss) may leave it damaged. The next start must
// notice (the open-marker is still there), set the file aside and rebuild the
// state from the snapshot and the Raft log.
func TestStateFileDamagedByACrashIsRebuilt(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(t *testing.T, path string)
	}{
		{"MetaPagesZeroed", func(t *testing.T, path string) {
			overwrite(t, path, 0, 8192, 0)
		}},
		{"DataPagesScrambled", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			overwrite(t, path, 2*4096, int(fi.Size())-2*4096, 0xA5)
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "n1")
			cfg := loneConfig(dir)

			n, err := raftnode.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, leads(n))
			for i := 0; i < 20; i++ {
				register(t, n, fmt.Sprintf("w%02d", i))
			}
			if err := n.Shutdown(); err != nil {
				t.Fatal(err)
			}
			// Simulate a crash and a reboot: the marker stays, written by
			// another boot, and the file is broken.
			statePath := filepath.Join(dir, "state.db")
			if err := os.WriteFile(statePath+".open", []byte("an-earlier-boot"), 0o600); err != nil {
				t.Fatal(err)
			}
			damage.do(t, statePath)

			n, err = raftnode.Open(cfg)
			if err != nil {
				t.Fatalf("reopen after damage: %v", err)
			}
			defer n.Shutdown()
			waitFor(t, 10*time.Second, leads(n))
			waitRebuilt(t, n, 20)
			if _, err := os.Stat(statePath + ".open"); err != nil {
				t.Fatalf("no open-marker while the node runs: %v", err)
			}
		})
	}
}

// reopenSetAside starts a node whose state file is damaged, checks that
// the start set it aside, and waits for it to lead.
func reopenSetAside(t *testing.T, cfg raftnode.Config, statePath string) *raftnode.Node {
	t.Helper()
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatalf("reopen after damage: %v", err)
	}
	if _, err := os.Stat(statePath + ".damaged"); err != nil {
		n.Shutdown()
		t.Fatalf("the damaged file was not set aside: %v", err)
	}
	waitFor(t, 10*time.Second, leads(n))
	return n
}

// waitRebuilt waits until a node's state holds the given number of workers
// and checks its store.
func waitRebuilt(t *testing.T, n *raftnode.Node, workers int) {
	t.Helper()
	waitFor(t, 10*time.Second, func() error {
		ws, err := n.FSM().Workers()
		if err != nil {
			return err
		}
		if len(ws) != workers {
			return fmt.Errorf("%d workers after the rebuild, want %d", len(ws), workers)
		}
		return nil
	})
	if err := n.FSM().Check(); err != nil {
		t.Fatalf("rebuilt state: %v", err)
	}
}

// loneConfig is the configuration of a one-node cluster "n1" with its data
// in dir and short timeouts.
func loneConfig(dir string) raftnode.Config {
	cfg := raftnode.DefaultConfig()
	cfg.ID, cfg.RaftAddr, cfg.DataDir, cfg.Bootstrap = "n1", "127.0.0.1:0", dir, true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
	cfg.RaftLogLevel = "OFF"
	return cfg
}

func leads(n *raftnode.Node) func() error {
	return func() error {
		if !n.IsLeader() {
			return errors.New("not leader yet")
		}
		return nil
	}
}

func overwrite(t *testing.T, path string, off, n int, b byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = b
	}
	if _, err := f.WriteAt(buf, int64(off)); err != nil {
		t.Fatal(err)
	}
}

// TestStateFileLeftByAProcessCrashIsKept: the same boot means the kernel
// still holds every page the crashed process wrote, so the file is reused.
func TestStateFileLeftByAProcessCrashIsKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	cfg := loneConfig(dir)
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, leads(n))
	register(t, n, "w1")
	marker := filepath.Join(dir, "state.db.open")
	boot, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if len(boot) == 0 {
		t.Skip("this kernel gives no boot id: every crash rebuilds")
	}
	// The crash: the marker of this boot stays.
	if err := os.WriteFile(marker, boot, 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	n, err = raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	after, err := os.Stat(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("the state file of a process crash was replaced, not reused")
	}
	if _, err := n.FSM().Worker("w1"); err != nil {
		t.Fatalf("state lost: %v", err)
	}
}

// TestDamagedStateFileIsRebuiltAtStart: a state file found damaged by the
// page check before serving is set aside and rebuilt from the snapshot and
// the log, rather than crashing bbolt. A disk can damage a file that was
// closed cleanly; that start checks the few pages it reads first
// (store.QuickCheck) and, with those damaged as here, all of them first;
// damage elsewhere is found in the background
// (TestBackgroundPageCheckStopsADamagedNode) or, if bbolt crashes on it
// first, by the next start, which checks first, as does one asked to
// (--state-check start).
func TestDamagedStateFileIsRebuiltAtStart(t *testing.T) {
	for _, how := range []string{"Asked", "LastCheckUnfinished", "ClosedCleanly"} {
		testDamagedStateFileIsRebuiltAtStart(t, how)
	}
}

func testDamagedStateFileIsRebuiltAtStart(t *testing.T, how string) {
	for _, fsync := range []bool{false, true} {
		for _, damage := range []struct {
			name string
			do   func(t *testing.T, path string)
		}{
			{"Truncated", func(t *testing.T, path string) {
				// bbolt grows its file ahead of use: cut it below the pages
				// in use (a meta page, the freelist and a few more).
				if err := os.Truncate(path, 3*4096); err != nil {
					t.Fatal(err)
				}
			}},
			{"200BytesFlippedAtEveryDataPage", func(t *testing.T, path string) {
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				for off := 2 * 4096; off < int(fi.Size()); off += 4096 {
					overwrite(t, path, off, 200, 0x5A)
				}
			}},
			{"AJobHeadThatDoesNotDecode", func(t *testing.T, path string) {
				// Sound pages, a bad record where the FSM's load reads it
				// (the head of job-1, pending, in the live jobs' heads
				// bucket, keyed by its seq): the page check passes it, the
				// load does not.
				db, err := bolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if err := db.Update(func(tx *bolt.Tx) error {
					return tx.Bucket([]byte("heads")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0xEE, 1, 2})
				}); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(fmt.Sprintf("%s/%s/StateFsync=%v", how, damage.name, fsync), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "n1")
				cfg := loneConfig(dir)
				cfg.StateFsync = fsync
				n, err := raftnode.Open(cfg)
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Second, leads(n))
				for i := 0; i < 10; i++ {
					register(t, n, fmt.Sprintf("w%02d", i))
				}
				if err := n.Snapshot(); err != nil {
					t.Fatal(err)
				}
				for i := 10; i < 20; i++ {
					register(t, n, fmt.Sprintf("w%02d", i))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := n.Propose(ctx, fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "a"}}}}); err != nil {
					t.Fatal(err)
				}
				if err := n.Shutdown(); err != nil {
					t.Fatal(err)
				}
				statePath := filepath.Join(dir, "state.db")
				damage.do(t, statePath)
				switch how {
				case "Asked":
					cfg.StateCheck = raftnode.StateCheckStart
				case "LastCheckUnfinished":
					if err := os.WriteFile(statePath+".unchecked", []byte("running"), 0o600); err != nil {
						t.Fatal(err)
					}
				}

				n = reopenSetAside(t, cfg, statePath)
				defer n.Shutdown()
				waitRebuilt(t, n, 20)
				if _, err := n.FSM().Job("job-1"); err != nil {
					t.Fatalf("job-1 after the rebuild: %v", err)
				}
			})
		}
	}
}
