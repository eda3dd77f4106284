//go:build unix

package proccluster

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one workron process (a server or a worker), restartable. Its
// stdout and stderr are appended to Log, each start behind a header line.
// In a network namespace it is started through `ip netns exec`, which execs
// the binary in place, so the pid is the binary's own and signals reach it.
// Set the exported fields before the first Start; the methods are safe for
// concurrent use.
type Proc struct {
	Name  string
	Bin   string
	Args  []string // the arguments of the next Start without any
	Env   []string // added to this process's environment
	Log   string   // file the output is appended to
	Netns string   // network namespace to run in; "" for this one
	// OwnGroup puts the process in a process group of its own, so a Ctrl-C
	// of the harness reaches the harness only (which then stops it).
	OwnGroup bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process has exited
	paused bool
	starts int
	// expectExit is set while the harness itself stops the process, so an
	// exit is not counted as a crash.
	expectExit bool
	crashes    []string
}

// Start starts the process with args (none: the previous start's, or Args)
// and returns the log's size before it, so the caller can read what this
// run wrote (LogSince). A process still running is left alone.
func (p *Proc) Start(args ...string) (int64, error) {
	p.mu.Lock()
	running := p.cmd != nil && !p.exitedLocked()
	if args == nil {
		args = p.Args
	}
	p.mu.Unlock()
	if running {
		return 0, nil
	}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("log of %s: %w", p.Name, err)
	}
	defer f.Close() // the child holds its own copy
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("log of %s: %w", p.Name, err)
	}
	fmt.Fprintf(f, "=== %s: starting %s %s\n", time.Now().Format(time.StampMilli), p.Name, strings.Join(args, " "))
	var cmd *exec.Cmd
	if p.Netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.Netns, p.Bin}, args...)...)
	} else {
		cmd = exec.Command(p.Bin, args...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if p.Env != nil {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	if p.OwnGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.Args, p.cmd, p.done, p.paused, p.expectExit = args, cmd, done, false, false
	p.starts++
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if !p.expectExit {
			p.crashes = append(p.crashes, fmt.Sprintf("%s exited by itself at %s: %v", p.Name, time.Now().Format(time.StampMilli), err))
		}
		p.mu.Unlock()
		close(done)
	}()
	return fi.Size(), nil
}

// Signal sends sig to the running process; false if none runs.
func (p *Proc) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return false
	}
	return p.cmd.Process.Signal(sig) == nil
}

func (p *Proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() { p.StopWith(syscall.SIGKILL, 0) }

// Stop sends SIGTERM and waits up to grace for the exit, then sends SIGKILL
// and waits (at once when grace is 0).
func (p *Proc) Stop(grace time.Duration) {
	if grace == 0 {
		p.Kill()
		return
	}
	p.StopWith(syscall.SIGTERM, grace)
}

// StopWith sends sig (and SIGCONT, harmless, if the process was paused) and
// waits up to grace for the exit, then sends SIGKILL and waits (grace 0:
// waits as long as it takes). The exit is not counted as a crash.
func (p *Proc) StopWith(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil || p.exitedLocked() {
		p.mu.Unlock()
		return
	}
	p.expectExit = true
	paused := p.paused
	p.paused = false
	p.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
			_ = cmd.Process.Kill()
		}
	}
	<-done
}

// Pause sends SIGSTOP; false if no process runs.
func (p *Proc) Pause() bool {
	if !p.Signal(syscall.SIGSTOP) {
		return false
	}
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	return true
}

// Resume sends SIGCONT to a paused process.
func (p *Proc) Resume() {
	p.mu.Lock()
	wasPaused := p.paused
	p.paused = false
	p.mu.Unlock()
	if wasPaused {
		p.Signal(syscall.SIGCONT)
	}
}

// Running reports whether the current process is alive (paused counts);
// false before the first start.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// Paused reports whether the process was paused and not resumed since.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Exited is closed when the current process exits (nil before the first
// start).
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Pid is the current process's id (0 before the first start).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Starts is how many times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Crashes lists the exits the harness did not cause.
func (p *Proc) Crashes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.crashes)
}

// Tail is the last n lines of the log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// LogSince is what the log got from offset on.
func (p *Proc) LogSince(off int64) string {
	b, err := os.ReadFile(p.Log)
	if err != nil || int64(len(b)) < off {
		return ""
	}
	return string(b[off:])
}
