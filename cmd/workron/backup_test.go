package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// backupFixture is a backup of a cluster holding state of every kind, and
// what that cluster answered for it.
type backupFixture struct {
	file   string            // the backup
	before map[string]string // readState of the cluster it was taken from
	parent string            // the job with idempotency key "parent-1"
	lease  uint64            // the lease of its running job
}

// makeBackup fills a one-node cluster with jobs in every status, schedules,
// workers and a paused queue, and takes `workron backup` of it.
func makeBackup(t *testing.T, ctx context.Context, hc *http.Client) backupFixture {
	t.Helper()
	c := clustertest.New(t, 1, clustertest.WithLeaseTTL(10*time.Minute)) // the running job stays running
	src := c.URL(0)
	submit := func(req wire.SubmitRequest) string {
		var j wire.Job
		decodeInto(t, post(t, hc, src+"/jobs", req), &j)
		return j.ID
	}
	claim := func(worker, queue string) wire.Job {
		var res wire.ClaimResponse
		decodeInto(t, post(t, hc, src+"/jobs/claim", wire.ClaimRequest{WorkerID: worker, Queues: []string{queue}, Shell: true}), &res)
		if len(res.Jobs) != 1 {
			t.Fatalf("claim by %s from %s: %d jobs", worker, queue, len(res.Jobs))
		}
		return res.Jobs[0]
	}

	// Workers: one registered with resources, one known from its claims.
	post(t, hc, src+"/workers/register", wire.Worker{ID: "gpu-1", Tags: []string{"a100"}, Queues: []string{"done", "failed"},
		Resources: wire.Resources{VRAMMB: 80000, MemoryMB: 64000, CPUMillis: 16000, Slots: 2}})
	// Jobs: done (with output), failed for good, running, pending, delayed,
	// blocked, cancelled, and one in a paused queue.
	one := 1
	exit0, exit2 := 0, 2
	submit(wire.SubmitRequest{Command: "echo ok", Queue: "done"})
	j := claim("gpu-1", "done")
	post(t, hc, src+"/jobs/"+j.ID+"/done", wire.ReportRequest{Lease: j.Lease, ExitCode: &exit0, Output: "ok\n"})
	submit(wire.SubmitRequest{Command: "false", Queue: "failed", MaxAttempts: &one})
	j = claim("gpu-1", "failed")
	post(t, hc, src+"/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, ExitCode: &exit2, Output: "no\n"})
	submit(wire.SubmitRequest{Command: "sleep 100", Queue: "running", Metadata: map[string]string{"k": "v"}})
	running := claim("cpu-1", "running")
	parent := submit(wire.SubmitRequest{Command: "echo parent", Priority: 3, IdempotencyKey: "parent-1"})
	submit(wire.SubmitRequest{Command: "echo later", Delay: "2h"})
	submit(wire.SubmitRequest{Command: "echo child", DependsOn: []string{parent}})
	gone := submit(wire.SubmitRequest{Command: "echo never"})
	post(t, hc, src+"/jobs/"+gone+"/cancel", nil)
	submit(wire.SubmitRequest{Command: "echo held", Queue: "ops"})
	post(t, hc, src+"/queues/ops/pause", nil)
	// Schedules: one active, one paused.
	post(t, hc, src+"/schedules", wire.ScheduleRequest{Name: "nightly", Cron: "30 2 * * *", Timezone: "Europe/Paris",
		Overlap: "skip", Job: wire.SubmitRequest{Command: "backup.sh", Queue: "ops", Timeout: "1h"}})
	post(t, hc, src+"/schedules", wire.ScheduleRequest{Name: "hourly", Cron: "@hourly", Catchup: "none",
		Job: wire.SubmitRequest{Type: "report", Payload: json.RawMessage(`{"n":1}`)}})
	post(t, hc, src+"/schedules/hourly/pause", nil)
	before := readState(t, hc, src)

	file := filepath.Join(t.TempDir(), "state.bak")
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"backup", file, "--server", src}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "wrote ") {
		t.Fatalf("workron backup: %v, printed %q\n%s", err, stdout.String(), stderr.String())
	}
	return backupFixture{file: file, before: before, parent: parent, lease: running.Lease}
}

// TestBackupRestoreRoundTrip takes `workron backup` of a cluster holding
// state of every kind, stages it in a new data directory with `workron
// restore --data`, starts `workron server --bootstrap` on it and requires
// every read to match the original.
func TestBackupRestoreRoundTrip(t *testing.T) {
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := func(t *testing.T, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(ctx, args, &stdout, &stderr); err != nil {
			t.Fatalf("workron %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	fx := makeBackup(t, ctx, hc)
	file, before, parent := fx.file, fx.before, fx.parent

	data := filepath.Join(t.TempDir(), "restored")
	t.Run("RestoreNeedsAFile", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, []string{"restore", "--data", data}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "usage") {
			t.Fatalf("restore without a file: %v", err)
		}
	})
	if out := cli(t, "restore", "--data", data, file); !strings.Contains(out, "--bootstrap --data "+data) {
		t.Fatalf("restore printed %q", out)
	}
	t.Run("RestoreRefusesADirectoryInUse", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if err := run(ctx, []string{"restore", "--data", data, file}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("restore into a used directory: %v", err)
		}
	})
	t.Run("AStagedRestoreNeedsBootstrap", func(t *testing.T) {
		var stderr bytes.Buffer
		err := run(ctx, []string{"server", "--id", "r1", "--data", data, "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0"}, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), "--bootstrap") {
			t.Fatalf("server without --bootstrap on a staged restore: %v", err)
		}
	})

	restored := startServerCmd(t, "--id", "r1", "--bootstrap", "--data", data)
	clustertest.WaitFor(t, 10*time.Second, func() error {
		var h wire.Health
		return getJSON(hc, restored.url+"/health", &h)
	})
	after := readState(t, hc, restored.url)
	for _, what := range []string{"jobs", "schedules", "workers", "queues"} {
		if before[what] != after[what] {
			t.Errorf("%s differ after restore:\nbefore %s\nafter  %s", what, before[what], after[what])
		}
	}

	t.Run("TheRestoredClusterGoesOn", func(t *testing.T) {
		var j wire.Job
		decodeInto(t, post(t, hc, restored.url+"/jobs", wire.SubmitRequest{Command: "echo again"}), &j)
		if j.ID != "job-9" {
			t.Errorf("the next job is %s, want job-9 after the eight restored", j.ID)
		}
		// The idempotency key came back too.
		var again wire.Job
		decodeInto(t, post(t, hc, restored.url+"/jobs", wire.SubmitRequest{Command: "echo parent", IdempotencyKey: "parent-1"}), &again)
		if again.ID != parent {
			t.Errorf("resubmit with a restored key gave %s, want %s", again.ID, parent)
		}
		var cl wire.Cluster
		if err := getJSON(hc, restored.url+"/cluster", &cl); err != nil || len(cl.Nodes) != 1 || cl.Nodes[0].ID != "r1" {
			t.Errorf("restored cluster %+v (%v), want r1 alone", cl, err)
		}
	})
	if _, err := os.Stat(filepath.Join(data, "restore-pending.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staged backup is still there after the restore: %v", err)
	}
}

// readState reads everything a restore must bring back, as JSON text by
// kind. Workers are compared without their status and last heartbeat,
// which the node that served them also takes from its memory of polls.
func readState(t *testing.T, hc *http.Client, base string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	var jobs wire.JobList
	if err := getJSON(hc, base+"/jobs?limit=1000", &jobs); err != nil {
		t.Fatal(err)
	}
	var workers wire.WorkerList
	if err := getJSON(hc, base+"/workers", &workers); err != nil {
		t.Fatal(err)
	}
	for i := range workers.Workers {
		workers.Workers[i].Status, workers.Workers[i].LastHeartbeat = "", time.Time{}
	}
	var (
		schedules json.RawMessage
		queues    wire.QueueList
	)
	if err := getJSON(hc, base+"/schedules", &schedules); err != nil {
		t.Fatal(err)
	}
	if err := getJSON(hc, base+"/queues", &queues); err != nil {
		t.Fatal(err)
	}
	for i := range queues.Queues {
		queues.Queues[i].OldestPendingSeconds = 0 // grows with the clock
	}
	for k, v := range map[string]any{"jobs": jobs, "workers": workers, "schedules": schedules, "queues": queues} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = string(b)
	}
	if len(jobs.Jobs) != 8 || len(workers.Workers) != 2 || !strings.Contains(out["schedules"], "nightly") || !strings.Contains(out["queues"], `"paused":true`) {
		t.Fatalf("state of %s is not what the test made: %v", base, out)
	}
	return out
}

// TestBackupErrorCarriesServerMessage checks that a refused backup says what
// the server said, in the one error format of the CLI (#18 item 6), and
// leaves no file behind.
func TestBackupErrorCarriesServerMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(wire.Error{Error: "GET /backup needs the admin role", Code: "forbidden"})
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "state.bak")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"backup", file, "--server", srv.URL}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "client: 403 forbidden: GET /backup needs the admin role") {
		t.Fatalf("backup refused with 403: err %v, want the server's message", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused backup left %s: %v", file, err)
	}
	if _, err := os.Stat(file + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused backup left %s.tmp: %v", file, err)
	}
}
