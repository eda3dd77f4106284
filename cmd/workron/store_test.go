package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestStoreCompact fills a node's state file, lets retention delete the
// jobs, and compacts the file with `workron store compact`: refused while
// the node runs, then giving the free pages back once it is stopped, and
// the node starts again on the compacted file.
func TestStoreCompact(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	args := []string{"--id", "n1", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--data", dir, "--bootstrap",
		"--raft-heartbeat-timeout", "50ms", "--raft-election-timeout", "50ms",
		"--sweep-interval", "20ms", "--retention-failed", "0", "--log-level", "error"}
	srv, _ := inProcessNode(t, args...)
	pollUntil(t, 10*time.Second, func() error {
		if !srv.node.IsLeader() {
			return errors.New("not leader yet")
		}
		return nil
	})
	ctx := context.Background()
	payload := []byte(`{"blob":"` + strings.Repeat("x", 4000) + `"}`)
	var ids []string
	for range 8 {
		jobs := make([]fsm.NewJob, 250)
		for i := range jobs {
			jobs[i] = fsm.NewJob{Command: "true", Payload: payload, MaxAttempts: 1, Retention: 1}
		}
		res, err := srv.node.Propose(ctx, fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}})
		if err != nil || res.Err != nil {
			t.Fatalf("submit: %v %v", err, res.Err)
		}
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
	}
	grown := srv.node.DiskUsage()
	cancels := make([]fsm.Cmd, len(ids))
	for i, id := range ids {
		cancels[i] = fsm.Cmd{Op: fsm.OpCancel, Cancel: &fsm.Cancel{JobID: id}}
	}
	if _, errs := srv.node.ProposeAll(ctx, cancels); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	pollUntil(t, 20*time.Second, func() error { // the sweeper deletes them
		if n, err := srv.node.FSM().Job(ids[len(ids)-1]); err == nil {
			return fmt.Errorf("job %s still there", n.ID)
		}
		return nil
	})
	shrunk := srv.node.DiskUsage()
	if shrunk.StateBytes < grown.StateBytes || shrunk.StateInUseBytes > shrunk.StateBytes/2 {
		t.Fatalf("after the deletes the state file is %d bytes, %d in use; grown it was %+v", shrunk.StateBytes, shrunk.StateInUseBytes, grown)
	}

	var out, errOut bytes.Buffer
	err := run(ctx, []string{"store", "compact", "--data", dir}, &out, &errOut)
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "stop the node") {
		t.Fatalf("compact of a running node's data: %v, want it refused", err)
	}
	applied := srv.node.AppliedIndex()
	if err := srv.shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"store", "compact", "--data", dir}, &out, &errOut); err != nil {
		t.Fatalf("compact: %v (%s)", err, errOut.String())
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "compacted "+filepath.Join(dir, "state.db")+": ") || !strings.Contains(out.String(), "given back") {
		t.Fatalf("compact printed %q", out.String())
	}
	again, _ := inProcessNode(t, args...)
	pollUntil(t, 10*time.Second, func() error {
		if got := again.node.AppliedIndex(); got < applied {
			return fmt.Errorf("applied %d, want %d", got, applied)
		}
		return nil
	})
	if u := again.node.DiskUsage(); u.StateBytes >= shrunk.StateBytes/2 {
		t.Fatalf("state file after compaction %d bytes, before %d", u.StateBytes, shrunk.StateBytes)
	}
}
