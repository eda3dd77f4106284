package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
)

// outputDrainLimit bounds how long we read output after the command's
// process group is gone; only a process that left the group can hold the
// pipe open that long.
const outputDrainLimit = 2 * time.Second

// runShell runs job.Command (with "sh -c", or split into words on a worker
// with an allow-list) in a process group of its own and returns how it
// ended. When ctx ends first, the group is stopped and the outcome carries
// ctx's cause. A command the worker refuses fails for good.
func (w *Worker) runShell(ctx context.Context, job wire.Job) outcome {
	cmd, err := w.jobCommand(job)
	if err != nil {
		return failFinal(err)
	}
	tail := newRing(w.cfg.OutputTail)
	pr, pw, err := os.Pipe()
	if err != nil {
		return outcome{err: fmt.Errorf("output pipe: %w", err)}
	}
	g, err := w.startGroup()
	if err != nil {
		_, _ = pr.Close(), pw.Close()
		return outcome{err: err}
	}
	cmd.Stdout, cmd.Stderr = pw, pw // one pipe keeps the interleaving
	cmd.SysProcAttr = w.procAttr(g.pgid)
	setPdeathsig(cmd.SysProcAttr)
	err = cmd.Start()
	_ = pw.Close() // the children hold their own copies
	if err != nil {
		g.stop()
		_ = pr.Close()
		return outcome{err: fmt.Errorf("start %s: %w", cmd.Args[0], err)}
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(tail, pr)
	}()

	waitErr, cause := w.waitOrStop(ctx, cmd, g.pgid)
	// Anything the command left behind in its group goes with it.
	g.stop()
	drainOutput(copied, pr)

	code, err := exitStatus(cmd, waitErr)
	switch {
	case cause != nil:
		return stoppedOutcome(cause, code, tail.String())
	case err != nil:
		return outcome{exitCode: code, output: tail.String(), err: err}
	case *code != 0:
		return outcome{exitCode: code, output: tail.String(), err: fmt.Errorf("exit status %d", *code)}
	}
	return outcome{exitCode: code, output: tail.String()}
}

// jobCommand builds the process of a command job, not yet started: "sh -c
// COMMAND", or on a worker with an allow-list the allowed program with the
// command's other words as arguments; with the job's environment, and the
// run-as user's home directory as its working directory.
func (w *Worker) jobCommand(job wire.Job) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if w.allowed == nil {
		cmd = exec.Command("sh", "-c", job.Command)
	} else {
		var err error
		if cmd, err = w.allowedCommand(job.Command); err != nil {
			return nil, err
		}
	}
	env, err := w.jobEnv(job)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotAllowed, err)
	}
	cmd.Env = env
	if w.runAs != nil {
		cmd.Dir = w.runAs.dir()
	}
	return cmd, nil
}

// watcherScript is what leads each job's process group: it ignores the
// signals that stop a job, waits for its standard input (a pipe whose only
// write end the worker holds) to end, then kills its group. The pipe ends
// when the worker closes it or exits in any way, SIGKILL included.
const watcherScript = "trap '' HUP INT TERM; read x; kill -9 0"

// group is a job's process group, led by its watcher.
type group struct {
	pgid    int
	watcher *exec.Cmd
	hold    *os.File // the pipe's write end; never written
}

// startGroup starts a watcher in a new process group, for a job to join.
func (w *Worker) startGroup() (*group, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watcher pipe: %w", err)
	}
	cmd := exec.Command("sh", "-c", watcherScript)
	cmd.Env = []string{} // not nil: nil would mean the worker's environment
	cmd.Stdin = pr
	cmd.SysProcAttr = w.procAttr(0)
	if w.runAs != nil {
		cmd.Dir = w.runAs.dir()
	}
	err = cmd.Start()
	_ = pr.Close()
	if err != nil {
		_ = pw.Close()
		return nil, fmt.Errorf("start the job's process group: %w", err)
	}
	return &group{pgid: cmd.Process.Pid, watcher: cmd, hold: pw}, nil
}

// stop kills whatever is left in the group, the watcher included, and
// reaps the watcher.
func (g *group) stop() {
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	_ = g.hold.Close()
	_ = g.watcher.Wait()
}

// procAttr puts a process in the process group pgid (0: a new one led by
// the process) and, on a worker with RunAs, makes it run as that user.
func (w *Worker) procAttr(pgid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if w.runAs != nil {
		a.Credential = w.runAs.cred
	}
	return a
}

// waitOrStop waits for cmd. When ctx ends first it sends SIGTERM to the
// process group, then SIGKILL after KillGrace, and returns ctx's cause.
func (w *Worker) waitOrStop(ctx context.Context, cmd *exec.Cmd, pgid int) (waitErr, cause error) {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err, nil
	case <-ctx.Done():
	}
	cause = context.Cause(ctx)
	w.log.Info("stopping job", "pgid", pgid, "reason", cause)
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	kill := time.NewTimer(w.cfg.KillGrace)
	defer kill.Stop()
	select {
	case err := <-exited:
		return err, cause
	case <-kill.C:
	}
	w.log.Warn("job ignored SIGTERM: sending SIGKILL", "pgid", pgid)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-exited, cause
}

// drainOutput waits for the output copy to reach end of file, or closes the
// pipe after outputDrainLimit.
func drainOutput(copied <-chan struct{}, pr *os.File) {
	t := time.NewTimer(outputDrainLimit)
	defer t.Stop()
	select {
	case <-copied:
	case <-t.C:
		_ = pr.Close()
		<-copied
	}
	_ = pr.Close()
}

// exitStatus returns the command's exit code, 128+N when signal N ended it,
// and an error only when the command's status is unknown.
func exitStatus(cmd *exec.Cmd, waitErr error) (*int, error) {
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return nil, fmt.Errorf("wait for the command: %w", waitErr)
	}
	st := cmd.ProcessState
	code := st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
		return &code, fmt.Errorf("killed by signal %d (%s)", ws.Signal(), ws.Signal())
	}
	return &code, nil
}
