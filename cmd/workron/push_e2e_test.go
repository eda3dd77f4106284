//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestEndToEndCancelAndProgressArriveBeforeAHeartbeat runs the real
// `workron worker` against a node whose lease TTL is 90s, so the worker
// heartbeats every 30s; every wait below gives up after 15s, before any
// heartbeat could have carried the news. A cancel reaches the worker
// through its actions long-poll: the job's process gets SIGTERM and the job
// ends cancelled. Progress goes out as it is made: a reader sees each of
// the three values a job reports, the job moving on only once the last
// was seen.
func TestEndToEndCancelAndProgressArriveBeforeAHeartbeat(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts a node and a worker process")
	}
	bin := workronBinary(t)
	srv, _ := inProcessNode(t, "--id", "push1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "push1"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms",
		"--lease-ttl", "90s")
	startWorkerProc(t, bin, srv.advertise, "push-worker", nil, "--concurrency", "2", "--poll-wait", "5s")
	cs := clientSecurity{}
	cl, err := cs.newClient([]string{srv.advertise}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const beforeHeartbeat = 15 * time.Second // a heartbeat comes 30s after a job starts
	dir := t.TempDir()

	t.Run("ProgressShowsEachValue", func(t *testing.T) {
		gate := func(n int) string { return filepath.Join(dir, fmt.Sprintf("seen-%d", n)) }
		waitGate := func(n int) string { return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", gate(n)) }
		job, err := cl.Submit(t.Context(), wire.SubmitRequest{Command: fmt.Sprintf(
			"echo '::workron-progress 10 rows'; %s; echo '::workron-progress 40 sorting'; %s; echo '::workron-progress 80 writing'; %s",
			waitGate(1), waitGate(2), waitGate(3))})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct {
			pct int
			msg string
		}{{10, "rows"}, {40, "sorting"}, {80, "writing"}} {
			pollUntil(t, beforeHeartbeat, func() error {
				j, err := cl.Get(t.Context(), job.ID)
				if err != nil {
					return err
				}
				if p := j.Progress; j.Status != wire.StatusRunning || p == nil || p.Percent != want.pct || p.Message != want.msg {
					return fmt.Errorf("job %s, progress %+v; want running at %d%% %s", j.Status, j.Progress, want.pct, want.msg)
				}
				return nil
			})
			if err := os.WriteFile(gate(i+1), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		pollUntil(t, beforeHeartbeat, func() error {
			j, err := cl.Get(t.Context(), job.ID)
			if err != nil {
				return err
			}
			if j.Status != wire.StatusDone {
				return fmt.Errorf("job %s (%s), want done", j.Status, j.LastError)
			}
			return nil
		})
	})

	t.Run("CancelSignalsTheProcess", func(t *testing.T) {
		started, termed := filepath.Join(dir, "started"), filepath.Join(dir, "termed")
		job, err := cl.Submit(t.Context(), wire.SubmitRequest{Command: fmt.Sprintf(
			"trap 'echo TERM > %s; exit 143' TERM; touch %s; while true; do sleep 0.02; done", termed, started)})
		if err != nil {
			t.Fatal(err)
		}
		pollUntil(t, beforeHeartbeat, func() error {
			_, err := os.Stat(started)
			return err
		})
		if _, err := cl.Cancel(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, beforeHeartbeat, func() error {
			j, err := cl.Get(t.Context(), job.ID)
			if err != nil {
				return err
			}
			if j.Status != wire.StatusCancelled {
				return fmt.Errorf("job %s, want cancelled", j.Status)
			}
			return nil
		})
		if got, err := os.ReadFile(termed); err != nil || string(got) != "TERM\n" {
			t.Fatalf("the job's process was not signalled: %q, %v", got, err)
		}
	})
}
