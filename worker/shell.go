package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
)

// outputDrainLimit bounds how long we read output after the command's
// process group is gone; only a process that left the group can hold the
// pipe open that long.
const outputDrainLimit = 2 * time.Second

// runShell runs job.Command with "sh -c" in a process group of its own and
// returns how it ended. When ctx ends first, the group is stopped and the
// outcome carries ctx's cause.
func (w *Worker) runShell(ctx context.Context, job wire.Job) outcome {
	tail := newRing(w.cfg.OutputTail)
	pr, pw, err := os.Pipe()
	if err != nil {
		return outcome{err: fmt.Errorf("output pipe: %w", err)}
	}
	cmd := exec.Command("sh", "-c", job.Command)
	cmd.Env = jobEnv(job)
	cmd.Stdout, cmd.Stderr = pw, pw // one pipe keeps the interleaving
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = pw.Close() // the children hold their own copies
	if err != nil {
		_ = pr.Close()
		return outcome{err: fmt.Errorf("start sh: %w", err)}
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(tail, pr)
	}()

	pgid := cmd.Process.Pid
	waitErr, cause := w.waitOrStop(ctx, cmd, pgid)
	// Anything the shell left behind in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
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

// exitStatus returns the shell's exit code, 128+N when signal N ended it,
// and an error only when the command's status is unknown.
func exitStatus(cmd *exec.Cmd, waitErr error) (*int, error) {
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return nil, fmt.Errorf("wait for sh: %w", waitErr)
	}
	st := cmd.ProcessState
	code := st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
		return &code, fmt.Errorf("killed by signal %d (%s)", ws.Signal(), ws.Signal())
	}
	return &code, nil
}

// jobEnv returns the worker's environment plus the job's variables and the
// WORKRON_* ones, later entries winning.
func jobEnv(job wire.Job) []string {
	env := os.Environ()
	for _, k := range slices.Sorted(maps.Keys(job.Env)) {
		env = append(env, k+"="+job.Env[k])
	}
	return append(env,
		"WORKRON_JOB_ID="+job.ID,
		"WORKRON_ATTEMPT="+strconv.Itoa(job.Attempts),
	)
}
