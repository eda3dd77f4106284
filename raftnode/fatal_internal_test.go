package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
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

// A state file that cannot be written (here: closed under the FSM, as a
// full disk fails every commit) makes the node call OnFatal with a
// *fsm.StateWriteError, instead of panicking, and apply nothing.
func TestAStateWriteFailureStopsTheNode(t *testing.T) {
	stopped := make(chan error, 1)
	h := openHeldLeader(t, func(c *Config) {
		c.OnFatal = func(err error) {
			stopped <- err
			runtime.Goexit() // OnFatal does not return: this goroutine ends here
		}
	})
	applied := h.fsm.Applied()
	if err := h.state.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _, _ = h.Propose(ctx, submitOf(1)) }()
	select {
	case err := <-stopped:
		var we *fsm.StateWriteError
		if !errors.As(err, &we) || we.Applied != applied || we.Index <= applied || !strings.HasSuffix(we.Path, "state.db") {
			t.Fatalf("OnFatal got %v, want a StateWriteError after index %d", err, applied)
		}
	case <-ctx.Done():
		t.Fatal("OnFatal was not called")
	}
	if got := h.fsm.Applied(); got != applied {
		t.Fatalf("applied index %d after the failed write, want %d", got, applied)
	}
	cancel()
}
