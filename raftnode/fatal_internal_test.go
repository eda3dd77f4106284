package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/store"
)

// A disk that fills stops the node with one line that says so and names
// the data directory, and exit status 1.
func TestFatalExitNamesTheFullDisk(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("commit: %w", syscall.ENOSPC), "the disk holding the data directory is full"},
		{errors.New("input/output error"), "cannot write its state file"},
	} {
		var logs bytes.Buffer
		code := -1
		fatalExit(slog.New(slog.NewTextHandler(&logs, nil)), "/data/n1", func(c int) { code = c })(
			&fsm.StateWriteError{Applied: 41, Index: 42, Path: "/data/n1/state.db", Err: tc.err})
		line := logs.String()
		if code != 1 || strings.Count(line, "\n") != 1 || !strings.Contains(line, "level=ERROR") || !strings.Contains(line, tc.want) ||
			!strings.Contains(line, "data_dir=/data/n1") || !strings.Contains(line, "log entries 42..42") || !strings.Contains(line, "start the node again") {
			t.Errorf("exit %d, logged:\n%s", code, line)
		}
	}
}

// Damage the background page check found stops the node with a line that
// says so and what the next start does.
func TestFatalExitNamesADamagedStateFile(t *testing.T) {
	var logs bytes.Buffer
	code := -1
	fatalExit(slog.New(slog.NewTextHandler(&logs, nil)), "/data/n1", func(c int) { code = c })(
		&DamagedStateError{Path: "/data/n1/state.db", Err: fmt.Errorf("%w: page 7 reached twice", store.ErrDamaged)})
	line := logs.String()
	if code != 1 || strings.Count(line, "\n") != 1 || !strings.Contains(line, "level=ERROR") ||
		!strings.Contains(line, "page check found the state file damaged") || !strings.Contains(line, "rebuilds the state") {
		t.Errorf("exit %d, logged:\n%s", code, line)
	}
}

// A follower whose state file cannot be written (here: closed under its
// FSM, as a full disk fails every commit) calls OnFatal with a
// *fsm.StateWriteError, instead of panicking, and applies nothing more;
// the leader goes on.
func TestAStateWriteFailureStopsTheNode(t *testing.T) {
	h := openHeldLeader(t, nil)
	stopped := make(chan error, 1)
	cfg := DefaultConfig()
	cfg.ID, cfg.RaftAddr, cfg.DataDir = "n2", "127.0.0.1:0", filepath.Join(t.TempDir(), "n2")
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
	cfg.RaftLogLevel = "OFF"
	cfg.OnFatal = func(err error) {
		stopped <- err
		runtime.Goexit() // OnFatal does not return: Raft's FSM goroutine ends here
	}
	f, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.AddVoter(ctx, "n2", f.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Propose(ctx, submitOf(1)); err != nil {
		t.Fatal(err)
	}
	poll.Wait(t, 10*time.Second, 10*time.Millisecond, func() error {
		if f.fsm.Applied() < h.fsm.Applied() {
			return errors.New("n2 has not caught up yet")
		}
		return nil
	})
	applied := f.fsm.Applied()
	if err := f.state.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Propose(ctx, submitOf(1)); err != nil {
		t.Fatalf("the leader's submit: %v", err)
	}
	select {
	case err := <-stopped:
		var we *fsm.StateWriteError
		if !errors.As(err, &we) || we.Applied != applied || we.Index <= applied || !strings.HasSuffix(we.Path, "state.db") {
			t.Fatalf("OnFatal got %v, want a StateWriteError after index %d", err, applied)
		}
	case <-ctx.Done():
		t.Fatal("OnFatal was not called")
	}
	if got := f.fsm.Applied(); got != applied {
		t.Fatalf("n2's applied index %d after the failed write, want %d", got, applied)
	}
}
