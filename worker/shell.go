package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	files, err := w.prepareFiles(cmd, job)
	if err != nil {
		return outcome{err: err}
	}
	defer files.remove()
	if steps := w.openSteps(ctx, cmd, job); steps != nil {
		defer steps.close()
	}
	tail := newRing(w.cfg.OutputTail)
	pr, pw, err := os.Pipe()
	if err != nil {
		return outcome{err: fmt.Errorf("output pipe: %w", err)}
	}
	cmd.Stdout, cmd.Stderr = pw, pw // one pipe keeps the interleaving
	cmd.SysProcAttr = w.procAttr()
	setPdeathsig(cmd.SysProcAttr)
	err = cmd.Start()
	_ = pw.Close() // the children hold their own copies
	if err != nil {
		_ = pr.Close()
		return outcome{err: fmt.Errorf("start %s: %w", cmd.Args[0], err)}
	}
	pgid := cmd.Process.Pid
	w.watch.add(pgid)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(progressOutput(ctx, tail), pr)
	}()

	waitErr, cause := w.waitOrStop(ctx, cmd, pgid)
	// Anything the command left behind in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	w.watch.remove(pgid)
	drainOutput(copied, pr)

	code, err := exitStatus(cmd, waitErr)
	switch {
	case cause != nil:
		return stoppedOutcome(cause, code, tail.String())
	case err != nil:
		return outcome{exitCode: code, output: tail.String(), err: err}
	case *code != 0:
		out := tail.String()
		if h, err, ok := shellHoldOff(*code, out); ok {
			return outcome{exitCode: code, output: out, err: err, hold: h}
		}
		return outcome{exitCode: code, output: out, err: fmt.Errorf("exit status %d", *code)}
	}
	return files.withResult(outcome{exitCode: code, output: tail.String()})
}

// openSteps opens the step socket of a shell job's process and names it
// in cmd's environment (stepsocket.go). A socket that cannot be opened is
// logged and left out: the job runs, and `workron step` in it says it
// has no socket.
func (w *Worker) openSteps(ctx context.Context, cmd *exec.Cmd, job wire.Job) *stepSocket {
	uid, gid := -1, -1
	if w.runAs != nil {
		uid, gid = int(w.runAs.cred.Uid), int(w.runAs.cred.Gid)
	}
	j := newJournal(w.client, &job)
	j.onPark = parkStops(ctx)
	s, err := openStepSocket(ctx, j, jobPeers(uid, gid, w.log))
	if err != nil {
		w.log.Warn("no step socket for the job", "job_id", job.ID, "err", err)
		return nil
	}
	cmd.Env = append(cmd.Env, StepSocketEnv+"="+s.path)
	if w.cfg.StepCLI != "" {
		cmd.Env = append(cmd.Env, "PATH="+prependPath(filepath.Dir(w.cfg.StepCLI), lastValue(cmd.Env, "PATH")))
	}
	return s
}

// prependPath is the search path path with dir first.
func prependPath(dir, path string) string {
	if path == "" {
		return dir
	}
	return dir + string(filepath.ListSeparator) + path
}

// lastValue is the value of the last entry of env named key (the one a
// process gets), "" if none.
func lastValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
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

// procAttr puts a command in a new process group that it leads and, on a
// worker with RunAs, makes it run as that user.
func (w *Worker) procAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
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
