//go:build unix

package proccluster

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/poll"
)

func TestProcStartStopAndLog(t *testing.T) {
	p := &Proc{Name: "sh", Bin: "/bin/sh", Log: filepath.Join(t.TempDir(), "sh.log"),
		Args: []string{"-c", "echo first; exec sleep 30"}}
	off, err := p.Start()
	if err != nil {
		t.Fatal(err)
	}
	if off != 0 || !p.Running() || p.Pid() == 0 {
		t.Fatalf("after the first start: offset %d, running %v, pid %d", off, p.Running(), p.Pid())
	}
	if err := poll.True(t.Context(), 10*time.Second, 10*time.Millisecond, func() bool { return strings.Contains(p.LogSince(off), "first") }); err != nil {
		t.Fatalf("log %q: %v", p.Tail(5), err)
	}
	if !p.Pause() || !p.Paused() {
		t.Fatal("Pause of a running process failed")
	}
	p.Kill() // resumes it too
	if p.Running() || len(p.Crashes()) != 0 {
		t.Fatalf("after Kill: running %v, crashes %v", p.Running(), p.Crashes())
	}
	off2, err := p.Start("-c", "echo second; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if got := p.LogSince(off2); !strings.Contains(got, "second") || strings.Contains(got, "first") {
		t.Errorf("LogSince(second start) = %q", got)
	}
	if c := p.Crashes(); len(c) != 1 || !strings.Contains(c[0], "exit status 3") {
		t.Errorf("Crashes = %v, want the exit of the second run", c)
	}
	if p.Signal(syscall.SIGTERM) || p.Starts() != 2 {
		t.Errorf("Signal to an exited process succeeded, or starts = %d, want 2", p.Starts())
	}
}
