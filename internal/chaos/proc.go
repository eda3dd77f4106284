//go:build unix

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one workron process, restartable with new arguments. Its stdout and
// stderr are appended to log. In a network namespace it is started through
// `ip netns exec`, which execs the binary in place, so the pid is the
// binary's own and signals reach it.
type proc struct {
	name  string
	bin   string
	netns string // "" for the harness's own namespace
	log   string

	mu     sync.Mutex
	args   []string
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process has exited
	paused bool
	starts int
	// expectExit is set while the harness itself stops the process, so an
	// exit is not counted as a crash.
	expectExit bool
	crashes    []string
}

// start starts the process with args; the log gets a header line.
func (p *proc) start(args []string) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child holds its own copy
	fmt.Fprintf(f, "=== %s: chaos starts %s %s\n", time.Now().Format(time.StampMilli), p.name, strings.Join(args, " "))
	var cmd *exec.Cmd
	if p.netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.netns, p.bin}, args...)...)
	} else {
		cmd = exec.Command(p.bin, args...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C of the harness reaches the harness
	// only, which then stops everything in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.args, p.cmd, p.done, p.paused, p.expectExit = args, cmd, done, false, false
	p.starts++
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if !p.expectExit {
			p.crashes = append(p.crashes, fmt.Sprintf("%s exited by itself at %s: %v", p.name, time.Now().Format(time.StampMilli), err))
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// signal sends sig to the running process; false if none runs.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return false
	}
	return p.cmd.Process.Signal(sig) == nil
}

func (p *proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL (after SIGCONT, harmless, if it was paused) and waits
// for the exit.
func (p *proc) kill() { p.stopWith(syscall.SIGKILL, 0) }

func (p *proc) stopWith(sig syscall.Signal, grace time.Duration) {
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
		select {
		case <-done:
			return
		case <-time.After(grace):
			_ = cmd.Process.Kill()
		}
	}
	<-done
}

// pause sends SIGSTOP; resume sends SIGCONT.
func (p *proc) pause() bool {
	if !p.signal(syscall.SIGSTOP) {
		return false
	}
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	return true
}

func (p *proc) resume() {
	p.mu.Lock()
	wasPaused := p.paused
	p.paused = false
	p.mu.Unlock()
	if wasPaused {
		p.signal(syscall.SIGCONT)
	}
}

// running reports whether the current process is alive (paused counts).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// crashList returns the unexpected exits so far.
func (p *proc) crashList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.crashes...)
}

// tail returns the last n lines of the log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
