package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

const stepUsage = `usage: workron step NAME -- COMMAND [ARG...]

Runs COMMAND once per job as durable step NAME of the shell job it runs in,
and records its standard output (UTF-8 text, at most 256 KiB) when it exits
0. In a later attempt of the job the step is not run again: its recorded
output is written to standard output and workron step exits 0. A COMMAND
that exits non-zero is not recorded (a later attempt runs it again) and
workron step exits with its code. The n-th step of one NAME in an attempt
is step NAME#n.
`

// errNoStepSocket is the error of workron step outside a shell job.
var errNoStepSocket = errors.New("workron step runs inside a job run by workron worker (" + worker.StepSocketEnv + " is not set)")

// runStep is `workron step NAME -- COMMAND [ARG...]`.
func runStep(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, stepUsage)
		return nil
	}
	if len(args) < 3 || args[1] != "--" || args[0] == "" {
		fmt.Fprint(stderr, stepUsage)
		return &exitError{code: 2}
	}
	name, argv := args[0], args[2:]
	path := os.Getenv(worker.StepSocketEnv)
	if path == "" {
		return errNoStepSocket
	}
	sc := worker.NewStepSocketClient(path)
	defer sc.Close()
	look, err := sc.Next(ctx, name)
	if err != nil {
		return err
	}
	if look.Step != nil {
		return replayStep(look.Step, stdout)
	}
	out, code, err := runStepCommand(argv, stdin, stdout, stderr)
	if err != nil || code != 0 {
		if rerr := sc.Release(context.WithoutCancel(ctx), look.Key); rerr != nil {
			fmt.Fprintln(stderr, "workron step:", rerr)
		}
		if err != nil {
			return fmt.Errorf("step %s: %w", look.Key, err)
		}
		return &exitError{code: code}
	}
	st, err := sc.Record(ctx, look.Key, wire.StepRequest{Result: out.result, Attempts: 1, DurationMillis: out.took.Milliseconds()})
	if err != nil {
		return err
	}
	if st.Status != wire.StepOK || string(st.Result) != string(out.result) {
		// Another attempt recorded the step first: its output is the step's.
		return fmt.Errorf("step %s: recorded by another attempt of the job; this run's output is not the step's", look.Key)
	}
	return nil
}

// stepRun is what a step's command gave.
type stepRun struct {
	result json.RawMessage // its standard output as a JSON string
	took   time.Duration
}

// runStepCommand runs argv with stdin and stderr passed through and its
// standard output copied to stdout as it comes and kept (at most
// worker.MaxStepResultBytes once encoded as JSON). It returns the exit
// code, or an error when the command could not run or its output cannot
// be recorded.
func runStepCommand(argv []string, stdin io.Reader, stdout, stderr io.Writer) (stepRun, int, error) {
	// Not bound to ctx: a signal to the job's process group reaches the
	// command too, and workron step waits for it to end.
	cmd := exec.Command(argv[0], argv[1:]...)
	var buf boundedBuffer
	buf.max = worker.MaxStepResultBytes
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, io.MultiWriter(stdout, &buf), stderr
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return stepRun{}, 128 + int(ws.Signal()), nil
		}
		return stepRun{}, ee.ExitCode(), nil
	case err != nil:
		return stepRun{}, 0, fmt.Errorf("run %s: %w", argv[0], err)
	case buf.over:
		return stepRun{}, 0, fmt.Errorf("its output passed %d bytes, the most a step records", worker.MaxStepResultBytes)
	case !utf8.Valid(buf.data):
		return stepRun{}, 0, errors.New("its output is not UTF-8 text, which a step records")
	}
	res, err := json.Marshal(string(buf.data))
	if err != nil {
		return stepRun{}, 0, fmt.Errorf("encode its output: %w", err)
	}
	if len(res) > worker.MaxStepResultBytes {
		return stepRun{}, 0, fmt.Errorf("its output is %d bytes as JSON, more than the %d a step records", len(res), worker.MaxStepResultBytes)
	}
	return stepRun{result: res, took: took}, 0, nil
}

// replayStep writes a recorded step's output; a step recorded as failed
// (by a handler) is an error.
func replayStep(st *wire.Step, stdout io.Writer) error {
	var out string
	if err := json.Unmarshal(st.Result, &out); err != nil && len(st.Result) > 0 {
		out = string(st.Result) // recorded by a handler: its JSON as it is
	}
	if st.Status == wire.StepFailed {
		return fmt.Errorf("step %s failed for good in an earlier attempt: %s", st.Key, out)
	}
	_, err := io.WriteString(stdout, out)
	return err
}

// boundedBuffer keeps the first max bytes written to it and notes more.
type boundedBuffer struct {
	data []byte
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	keep := p
	if room := b.max - len(b.data); len(keep) > room {
		b.over = true
		keep = keep[:max(room, 0)]
	}
	b.data = append(b.data, keep...)
	return len(p), nil
}
