package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

// carriesProgress reports whether a heartbeat gives any lease's progress.
func carriesProgress(req wire.WorkerHeartbeatRequest) bool {
	for _, l := range req.Jobs {
		if l.Progress != nil {
			return true
		}
	}
	return false
}

// progressOf lists the progress updates the fake server's heartbeats
// carried for job id, in order.
func (f *fakeServer) progressOf(id string) []wire.ProgressUpdate {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wire.ProgressUpdate
	for _, req := range f.beatReqs {
		for _, l := range req.Jobs {
			if l.JobID == id && l.Progress != nil {
				out = append(out, *l.Progress)
			}
		}
	}
	return out
}

// waitProgress waits until a heartbeat carried want for job id.
func (f *fakeServer) waitProgress(t *testing.T, id string, want wire.ProgressUpdate) {
	t.Helper()
	waitFor(t, 10*time.Second, "progress "+want.Message, func() bool {
		for _, p := range f.progressOf(id) {
			if p == want {
				return true
			}
		}
		return false
	})
}

func TestProgressAndResults(t *testing.T) {
	t.Run("TypedHandlerProgressRidesHeartbeatsAndItsResultTheReport", func(t *testing.T) {
		f := newFakeServer(t)
		release := make(chan struct{})
		var parent struct{ Rows int }
		startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
			w.Handle("count", func(ctx context.Context, job *worker.Job) error {
				if err := job.ParentResult("job-0", &parent); err != nil {
					return err
				}
				job.Progress(10, "start")
				job.Progress(55, "half way")
				<-release
				return job.SetResult(map[string]int{"rows": parent.Rows + 1})
			})
		})
		id := f.add(wire.Job{Type: "count", ParentResults: map[string]json.RawMessage{"job-0": json.RawMessage(`{"Rows":41}`)}})
		f.waitProgress(t, id, wire.ProgressUpdate{Percent: 55, Message: "half way"})
		close(release)
		rep := f.waitReport(t, id)
		if rep.Kind != "done" || string(rep.Req.Result) != `{"rows":42}` {
			t.Fatalf("report %s with result %s, want done with {\"rows\":42}", rep.Kind, rep.Req.Result)
		}
	})

	t.Run("ShellProgressLinesAndResultFile", func(t *testing.T) {
		f := workerOnFakeServer(t, func(c *worker.Config) { c.Shell = true })
		flag := filepath.Join(t.TempDir(), "go")
		cmd := `echo "::workron-progress 40 copying files"; while [ ! -e ` + flag + ` ]; do sleep 0.02; done; ` +
			`printf '%s' "$WORKRON_PARENT_RESULTS" > "$WORKRON_RESULT_FILE"`
		id := f.add(wire.Job{Command: cmd, ParentResults: map[string]json.RawMessage{"job-7": json.RawMessage(`[1,2]`)}})
		f.waitProgress(t, id, wire.ProgressUpdate{Percent: 40, Message: "copying files"})
		if err := os.WriteFile(flag, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		rep := f.waitReport(t, id)
		if rep.Kind != "done" || string(rep.Req.Result) != `{"job-7":[1,2]}` {
			t.Fatalf("report %s with result %s, want done with the parents' results", rep.Kind, rep.Req.Result)
		}
		if !strings.Contains(rep.Req.Output, "::workron-progress 40") {
			t.Errorf("output %q lost the progress line", rep.Req.Output)
		}
	})

	t.Run("TheReportCarriesTheLastProgressNoHeartbeatDid", func(t *testing.T) {
		f := workerOnFakeServer(t, func(c *worker.Config) { c.Shell = true; c.ProgressInterval = time.Minute })
		flag := filepath.Join(t.TempDir(), "go")
		// The first update goes at once; the next would wait a minute.
		id := f.add(wire.Job{Command: `echo '::workron-progress 10 a'; while [ ! -e ` + flag + ` ]; do sleep 0.02; done; ` +
			`echo '::workron-progress 100 all done'`})
		f.waitProgress(t, id, wire.ProgressUpdate{Percent: 10, Message: "a"})
		if err := os.WriteFile(flag, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		rep := f.waitReport(t, id)
		if rep.Kind != "done" || rep.Req.Progress == nil || *rep.Req.Progress != (wire.ProgressUpdate{Percent: 100, Message: "all done"}) {
			t.Fatalf("report %s with progress %+v, want done with the last progress", rep.Kind, rep.Req.Progress)
		}
	})

	t.Run("AResultFileThatIsNotJSONFailsTheAttempt", func(t *testing.T) {
		f := workerOnFakeServer(t, func(c *worker.Config) { c.Shell = true })
		id := f.add(wire.Job{Command: `echo 'rows: 12' > "$WORKRON_RESULT_FILE"`})
		rep := f.waitReport(t, id)
		if rep.Kind != "fail" || !strings.Contains(rep.Req.Error, "WORKRON_RESULT_FILE") || rep.Req.Result != nil {
			t.Fatalf("report %s %q result %s, want a failure naming WORKRON_RESULT_FILE", rep.Kind, rep.Req.Error, rep.Req.Result)
		}
	})

	t.Run("AnOlderClusterGetsHeartbeatsAndReportsWithoutThem", func(t *testing.T) {
		f := newFakeServer(t)
		f.protocol2 = true
		// The client retries the refused heartbeat (503) for longer than
		// the default TTL, which would lose the lease (ErrLeaseLost).
		f.ttl = 5 * time.Second
		release := make(chan struct{})
		startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
			w.Handle("t", func(ctx context.Context, job *worker.Job) error {
				job.Progress(30, "x")
				<-release
				return job.SetResult("r")
			})
		})
		id := f.add(wire.Job{Type: "t"})
		waitFor(t, 10*time.Second, "a heartbeat with and one without progress", func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			with, without := false, false
			for _, req := range f.beatReqs {
				with = with || carriesProgress(req)
				without = without || (len(req.Jobs) > 0 && !carriesProgress(req))
			}
			return with && without
		})
		close(release)
		waitFor(t, 10*time.Second, "the job done", func() bool { return f.job(id).Status == wire.StatusDone })
		reps := f.reportsOf(id)
		if len(reps) != 1 || reps[0].Req.Result != nil {
			t.Fatalf("reports %+v, want one, without its result", reps)
		}
	})
}
