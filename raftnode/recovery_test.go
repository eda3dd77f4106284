package raftnode_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
			cfg := raftnode.DefaultConfig()
			cfg.ID, cfg.RaftAddr, cfg.DataDir, cfg.Bootstrap = "n1", "127.0.0.1:0", dir, true
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
			cfg.RaftLogLevel = "OFF"

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
			// Simulate the crash: the marker stays and the file is broken.
			statePath := filepath.Join(dir, "state.db")
			if err := os.WriteFile(statePath+".open", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			damage.do(t, statePath)

			n, err = raftnode.Open(cfg)
			if err != nil {
				t.Fatalf("reopen after damage: %v", err)
			}
			defer n.Shutdown()
			waitFor(t, 10*time.Second, leads(n))
			waitFor(t, 10*time.Second, func() error {
				ws, err := n.FSM().Workers()
				if err != nil {
					return err
				}
				if len(ws) != 20 {
					return fmt.Errorf("%d workers after the rebuild, want 20", len(ws))
				}
				return nil
			})
			if err := n.FSM().Check(); err != nil {
				t.Fatalf("rebuilt state: %v", err)
			}
			if _, err := os.Stat(statePath + ".unclean"); err != nil {
				t.Fatalf("unclean file not set aside: %v", err)
			}
		})
	}
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
