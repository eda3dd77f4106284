package fsm_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestStateFormat1 starts an FSM on a state file as Workron wrote it before
// job records were binary (state format 1: every record JSON), as a node
// does on its first start after the upgrade or when it restores an older
// node's snapshot: the indexes it rebuilds, its digest and what it does next
// must be those of a node holding the same jobs in binary.
func TestStateFormat1(t *testing.T) {
	h := setup(t)
	prelude(t, h.f)
	h.index = 5
	h.do(submit(fsm.NewJob{Command: "done"}, fsm.NewJob{Command: "failed", MaxAttempts: 1}, fsm.NewJob{Command: "later", RunAt: ns(t0.Add(time.Hour))}))
	for _, j := range h.claim(fsm.Claim{WorkerID: "w", Max: 3}) {
		switch j.Command {
		case "done":
			h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, ExitCode: intp(0), Output: "ok\n"}))
		case "failed":
			h.ok(fail(j.ID, j.Lease, "boom"))
		}
	}

	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, snapshotBytes(t, h.f), 0o600); err != nil {
		t.Fatal(err)
	}
	rewriteAsFormat1(t, path, allJobs(t, h.f))
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open state format 1: %v", err)
	}
	g, err := fsm.New(st, nil)
	if err != nil {
		st.Close()
		t.Fatalf("new fsm on state format 1: %v", err)
	}
	t.Cleanup(func() {
		checkIndexes(t, g)
		if err := g.Check(); err != nil {
			t.Errorf("check: %v", err)
		}
		st.Close()
	})

	if digest(t, g) != digest(t, h.f) {
		t.Error("digest of the JSON records differs from the binary ones'")
	}
	if got, want := g.Queues(), h.f.Queues(); !reflect.DeepEqual(got, want) {
		t.Errorf("queues %+v, want %+v", got, want)
	}
	if got, want := g.Expired(math.MaxInt64, math.MaxInt32), h.f.Expired(math.MaxInt64, math.MaxInt32); !slices.Equal(got, want) {
		t.Errorf("leases %+v, want %+v", got, want)
	}
	next := claimCmd(fsm.Claim{WorkerID: "w", Max: 10, LeaseTTL: int64(ttl)})
	later := t0.Add(2 * time.Hour)
	got := applyCmd(t, g, h.index+1, later, next)
	want := applyCmd(t, h.f, h.index+1, later, next)
	if !slices.Equal(jobIDs(got[0].Jobs), jobIDs(want[0].Jobs)) {
		t.Errorf("next claim got %v, want %v", jobIDs(got[0].Jobs), jobIDs(want[0].Jobs))
	}
	if digest(t, g) != digest(t, h.f) {
		t.Error("digests differ after the next claim")
	}
}

// rewriteAsFormat1 rewrites the record of each job in the state file at
// path in JSON, as format 1 wrote them, and stamps the file format 1.
func rewriteAsFormat1(t *testing.T, path string, jobs []*store.Job) {
	t.Helper()
	if len(jobs) == 0 {
		t.Fatal("no jobs to rewrite")
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, j := range jobs {
			v, err := json.Marshal(j)
			if err != nil {
				return err
			}
			if err := tx.Bucket([]byte("jobs")).Put([]byte(j.ID), v); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("format"), binary.BigEndian.AppendUint64(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
}
