package worker

import (
	"log/slog"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/proctest"
)

func TestWatcher(t *testing.T) {
	// sleeper starts `sleep 30` leading a process group of its own.
	sleeper := func(t *testing.T) *exec.Cmd {
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd
	}

	t.Run("WhenThePipeEndsItKillsTheGroupsStillListed", func(t *testing.T) {
		listed, removed, never := sleeper(t), sleeper(t), sleeper(t)
		wt, err := startWatcher(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		wt.add(listed.Process.Pid)
		wt.add(removed.Process.Pid)
		wt.remove(removed.Process.Pid)
		wt.remove(never.Process.Pid) // not listed: changes nothing
		wt.stop()                    // returns once the watcher has exited

		done := make(chan error, 1)
		go func() { done <- listed.Wait() }()
		select {
		case <-done:
			if st := listed.ProcessState.Sys().(syscall.WaitStatus); st.Signal() != syscall.SIGKILL {
				t.Errorf("the listed group ended with %v, want SIGKILL", listed.ProcessState)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the listed group still runs 10s after the watcher's pipe ended")
		}
		for _, c := range []*exec.Cmd{removed, never} {
			if proctest.Gone(c.Process.Pid) {
				t.Errorf("process %d, not listed, was killed", c.Process.Pid)
			}
		}
	})

	t.Run("ANilWatcherDoesNothing", func(t *testing.T) {
		var wt *watcher
		wt.add(1)
		wt.remove(1)
		wt.stop()
	})
}
