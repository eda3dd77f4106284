package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/proctest"
	"github.com/workron/workron/worker"
)

func TestShellJobs(t *testing.T) {
	setup := workerOnFakeServer

	t.Run("SuccessReportsDoneWithExitCodeAndOutput", func(t *testing.T) {
		f := setup(t, nil)
		id := f.add(wire.Job{Command: "echo hello; echo oops >&2"})
		rep := f.waitReport(t, id)
		if rep.Kind != "done" || intPtr(rep.Req.ExitCode) != 0 || rep.Req.Output != "hello\noops\n" {
			t.Fatalf("report = %+v exit=%d, want done, 0, both lines", rep, intPtr(rep.Req.ExitCode))
		}
		if rep.Req.Lease != f.job(id).Lease || rep.Req.Lease == 0 {
			t.Fatalf("report lease %d, job lease %d", rep.Req.Lease, f.job(id).Lease)
		}
	})

	t.Run("NonZeroExitReportsFail", func(t *testing.T) {
		f := setup(t, nil)
		id := f.add(wire.Job{Command: "echo bad; exit 3"})
		rep := f.waitReport(t, id)
		if rep.Kind != "fail" || intPtr(rep.Req.ExitCode) != 3 || rep.Req.Error != "exit status 3" || rep.Req.Output != "bad\n" {
			t.Fatalf("report = %+v exit=%d, want fail with exit 3", rep, intPtr(rep.Req.ExitCode))
		}
		if rep.Req.Retry != nil {
			t.Fatalf("retry = %v, want the server's default", *rep.Req.Retry)
		}
	})

	t.Run("OutputIsCutToTheLastBytes", func(t *testing.T) {
		f := setup(t, func(c *worker.Config) { c.OutputTail = 16 })
		id := f.add(wire.Job{Command: "printf abcdefghij; printf klmnopqrstuvwxyz0123456789 >&2"})
		rep := f.waitReport(t, id)
		if rep.Req.Output != "uvwxyz0123456789" {
			t.Fatalf("output = %q, want the last 16 bytes", rep.Req.Output)
		}
	})

	t.Run("JobEnvironmentReachesTheCommand", func(t *testing.T) {
		f := setup(t, nil)
		id := f.add(wire.Job{
			Command: `echo "$WORKRON_JOB_ID $WORKRON_ATTEMPT $GREETING"`,
			Env:     map[string]string{"GREETING": "hi"},
		})
		rep := f.waitReport(t, id)
		if want := id + " 1 hi\n"; rep.Req.Output != want {
			t.Fatalf("output = %q, want %q", rep.Req.Output, want)
		}
	})

	t.Run("TimeoutKillsTheWholeProcessGroup", func(t *testing.T) {
		f := setup(t, nil)
		pidFile := filepath.Join(t.TempDir(), "pid")
		began := time.Now()
		id := f.add(wire.Job{
			Command: "sleep 30 & echo $! > " + pidFile + "; sleep 30",
			Timeout: "300ms",
		})
		rep := f.waitReport(t, id)
		if rep.Kind != "fail" || rep.Req.Error != "timed out after 300ms" {
			t.Fatalf("report = %+v, want fail timed out after 300ms", rep)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Fatalf("the job took %s to stop", took)
		}
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the background sleep to die", func() bool { return proctest.Gone(pid) })
	})

	t.Run("TimeoutsTheClusterNoLongerTakesStillRun", func(t *testing.T) {
		// An older release accepted timeouts over wire.MaxDuration; the
		// worker runs such a job rather than failing it.
		f := setup(t, nil)
		id := f.add(wire.Job{Command: "echo ok", Timeout: "2500000h0m0s"})
		rep := f.waitReport(t, id)
		if rep.Kind != "done" || rep.Req.Output != "ok\n" {
			t.Fatalf("report = %+v, want done with output ok", rep)
		}
	})

	t.Run("CancelActionKillsTheJobWithoutRetry", func(t *testing.T) {
		f := setup(t, nil)
		id := f.add(wire.Job{Command: "echo started; sleep 30"})
		f.waitStatus(t, id, wire.StatusRunning)
		f.cancel(id)
		rep := f.waitReport(t, id)
		if rep.Kind != "fail" || rep.Req.Error != "cancelled" || rep.Req.Retry == nil || *rep.Req.Retry {
			t.Fatalf("report = %+v, want fail, cancelled, retry false", rep)
		}
		if f.job(id).Status != wire.StatusCancelled {
			t.Fatalf("status = %s, want cancelled", f.job(id).Status)
		}
	})

	t.Run("ShellJobsCanBeTurnedOff", func(t *testing.T) {
		f := newFakeServer(t)
		cfg := testConfig(t, f.URL)
		cfg.Shell = false
		w, err := worker.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Run(t.Context()); !errors.Is(err, worker.ErrNothingToRun) {
			t.Fatalf("Run = %v, want ErrNothingToRun", err)
		}
	})

	t.Run("MoreHandlersThanAClaimMayNameAreRefused", func(t *testing.T) {
		f := newFakeServer(t)
		w, err := worker.New(testConfig(t, f.URL))
		if err != nil {
			t.Fatal(err)
		}
		for i := range wire.MaxTypes + 1 {
			w.Handle(fmt.Sprintf("type-%d", i), func(context.Context, *worker.Job) error { return nil })
		}
		if err := w.Run(t.Context()); !errors.Is(err, worker.ErrTooManyTypes) {
			t.Fatalf("Run = %v, want ErrTooManyTypes", err)
		}
		if regs, _ := f.counts(); regs != 0 {
			t.Fatalf("the worker registered %d times before refusing to run", regs)
		}
	})
}
