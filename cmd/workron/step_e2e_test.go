//go:build unix && !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/worker"
)

// TestEndToEndShellStepsRunOncePerJob runs a shell job of two `workron
// step`s on the real `workron worker`: its first attempt fails in the
// second step, after the first was recorded. The second attempt replays
// the first step's output (41) without running its command again, runs
// the second and ends done; the journal lists both steps.
func TestEndToEndShellStepsRunOncePerJob(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts a node and a worker process")
	}
	bin := workronBinary(t)
	srv, _ := inProcessNode(t, "--id", "step1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "step1"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms")
	// The job's process finds `workron` on the PATH it gets from its worker.
	startWorkerProc(t, bin, srv.advertise, "step-worker",
		[]string{"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")}, "--poll-wait", "1s")
	cs := clientSecurity{}
	cl, err := cs.newClient([]string{srv.advertise}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	dir := t.TempDir()
	counter, mark, out := filepath.Join(dir, "counter"), filepath.Join(dir, "failed-once"), filepath.Join(dir, "out")
	script := `set -e
n=$(workron step count -- sh -c 'echo run >> "$COUNTER"; echo 41')
workron step after -- sh -c 'if [ ! -e "$MARK" ]; then touch "$MARK"; exit 3; fi'
echo "got $n" >> "$OUT"`
	two := 2
	job, err := cl.Submit(t.Context(), wire.SubmitRequest{Command: script, MaxAttempts: &two,
		Backoff: &wire.Backoff{Base: "10ms", Max: "10ms"},
		Env:     map[string]string{"COUNTER": counter, "MARK": mark, "OUT": out}})
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, func() error {
		j, err := cl.Get(t.Context(), job.ID)
		switch {
		case err != nil:
			return err
		case j.Status == wire.StatusFailed:
			t.Fatalf("job failed after %d attempts: %s", j.Attempts, j.LastError)
		case j.Status != wire.StatusDone:
			return fmt.Errorf("job %s after %d attempts", j.Status, j.Attempts)
		case j.Attempts != 2:
			t.Fatalf("job done in %d attempts, want 2 (the first fails in step after)", j.Attempts)
		}
		return nil
	})
	if b, err := os.ReadFile(counter); err != nil || string(b) != "run\n" {
		t.Fatalf("step count's command ran %q (%v), want once", b, err)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "got 41\n" {
		t.Fatalf("the script saw %q (%v), want the step's output replayed once, in the attempt that ended", b, err)
	}
	list, err := cl.Steps(t.Context(), job.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range list.Steps {
		got = append(got, fmt.Sprintf("%s:%s:attempt%d", st.Key, st.Status, st.JobAttempt))
	}
	if want := "after:ok:attempt2 count:ok:attempt1"; strings.Join(got, " ") != want {
		t.Fatalf("journal %v, want %s", got, want)
	}
	st, err := cl.Step(t.Context(), job.ID, "count")
	if err != nil || string(st.Result) != `"41\n"` {
		t.Fatalf("step count recorded %s (%v), want its output as a JSON string", st.Result, err)
	}
}

// TestStepOutsideAJob: workron step without a step socket says where it
// runs, and runs nothing.
func TestStepOutsideAJob(t *testing.T) {
	t.Setenv(worker.StepSocketEnv, "")
	marker := filepath.Join(t.TempDir(), "ran")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"step", "x", "--", "touch", marker}, &stdout, &stderr)
	if !errors.Is(err, errNoStepSocket) || !strings.Contains(err.Error(), "workron step runs inside a job run by workron worker") {
		t.Fatalf("err %v, want errNoStepSocket", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran outside a job (%v)", err)
	}
}

// TestStepResultBoundIsTheClusters: the worker's copy of the bound of a
// step's result is the FSM's.
func TestStepResultBoundIsTheClusters(t *testing.T) {
	if worker.MaxStepResultBytes != fsm.MaxStepResultBytes {
		t.Fatalf("worker.MaxStepResultBytes %d, fsm.MaxStepResultBytes %d", worker.MaxStepResultBytes, fsm.MaxStepResultBytes)
	}
}
