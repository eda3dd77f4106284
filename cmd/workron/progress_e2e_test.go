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

// TestEndToEndDAGPassesResults runs the real `workron worker` on a two-job
// DAG: the parent reports progress with a ::workron-progress line, which
// GET /jobs/{id} shows while it runs, and writes its result into
// $WORKRON_RESULT_FILE; the child finds it in $WORKRON_PARENT_RESULTS and
// returns it as its own result.
func TestEndToEndDAGPassesResults(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts a node and a worker process")
	}
	bin := workronBinary(t)
	srv, _ := inProcessNode(t, "--id", "dag1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "dag1"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms",
		"--lease-ttl", "1500ms")
	startWorkerProc(t, bin, srv.advertise, "dag-worker", nil, "--concurrency", "2", "--poll-wait", "1s")
	cs := clientSecurity{}
	cl, err := cs.newClient([]string{srv.advertise}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	flag := filepath.Join(t.TempDir(), "go-on")
	jobs, err := cl.SubmitBatch(t.Context(), []wire.SubmitRequest{
		{Command: fmt.Sprintf(`echo '::workron-progress 50 counting rows'; while [ ! -e %s ]; do sleep 0.05; done; `+
			`printf '{"rows":12}' > "$WORKRON_RESULT_FILE"`, flag)},
		{Command: `printf '%s' "$WORKRON_PARENT_RESULTS" > "$WORKRON_RESULT_FILE"`, DependsOn: []string{"$0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	parent, child := jobs[0].ID, jobs[1].ID
	pollUntil(t, 30*time.Second, func() error {
		j, err := cl.Get(t.Context(), parent)
		if err != nil {
			return err
		}
		if j.Progress == nil || j.Progress.Percent != 50 || j.Progress.Message != "counting rows" {
			return fmt.Errorf("parent %s, progress %+v", j.Status, j.Progress)
		}
		return nil
	})
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var got *wire.Job
	pollUntil(t, 30*time.Second, func() error {
		if got, err = cl.Get(t.Context(), child); err != nil {
			return err
		}
		if got.Status != wire.StatusDone {
			return fmt.Errorf("child is %s (%s)", got.Status, got.LastError)
		}
		return nil
	})
	if want := fmt.Sprintf(`{%q:{"rows":12}}`, parent); string(got.Result) != want {
		t.Fatalf("child's result %s, want its parent's results %s", got.Result, want)
	}
	p, err := cl.Get(t.Context(), parent)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Result) != `{"rows":12}` || p.Progress == nil || p.Progress.Percent != 50 {
		t.Fatalf("parent: result %s progress %+v, want its result and its last progress", p.Result, p.Progress)
	}
}
