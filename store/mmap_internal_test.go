package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMmapLen(t *testing.T) {
	if mmapLen(filepath.Join(t.TempDir(), "none.db")) != int(minMmapLen) {
		t.Fatalf("a new file maps %d, want minMmapLen %d", mmapLen("none"), minMmapLen)
	}
	defer func(was int64) { minMmapLen = was }(minMmapLen)
	minMmapLen = 1 << 20
	st, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	insertJobs(t, st, 1, 64, 64, bigJob)
	if got, want := mmapLen(st.path), 1<<30; got != want {
		t.Fatalf("a file of %d bytes maps %d, want four times it rounded up to a GiB: %d", fileSize(t, st.path), got, want)
	}
}

// TestAGrowingCommitDoesNotWaitForASnapshot: a commit that grows the file
// while a snapshot's read transaction is open must not wait for it to end,
// as it did when the file outgrew its mapping (mmap.go). The mapping's
// floor is lowered to 128 MiB (bbolt grows a file mapped up to 16 MiB to
// the whole mapping at once), within which the test's file grows by 24 MiB;
// with a mapping as small as the file (the planted fault: mmapLen
// returning the file's size) the commits wait and the test fails.
func TestAGrowingCommitDoesNotWaitForASnapshot(t *testing.T) {
	defer func(was int64) { minMmapLen = was }(minMmapLen)
	minMmapLen = 128 << 20
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = Open(path, Options{NoSync: true}) // mapped as an existing file
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := fileSize(t, st.path)
	sn, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		insertJobs(t, st, 1, 384, 16, bigJob) // 24 transactions of 1 MiB
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a deadlock detector, not a speed check
		sn.Close()
		<-done
		t.Fatalf("commits that grew the file from %d to %d bytes waited for the snapshot's read transaction", before, fileSize(t, st.path))
	}
	sn.Close()
	if after := fileSize(t, st.path); after < before+16<<20 {
		t.Fatalf("the file grew from %d to %d bytes: the test wrote too little to need pages past it", before, after)
	}
}

func bigJob(seq uint64) *Job {
	return &Job{ID: fmt.Sprintf("job-%d", seq), Seq: seq, Status: StatusPending, Queue: "q",
		Command: strings.Repeat("x", 64<<10), MaxAttempts: 1, CreatedAt: int64(seq), RunAt: int64(seq)}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
