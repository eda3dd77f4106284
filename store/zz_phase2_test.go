package store

import (
	"os"
	"testing"
	"time"
)

func TestZZSplit(t *testing.T) {
	path := os.Getenv("ZZ_PATH")
	if path == "" {
		t.Skip()
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.View(func(tx *Tx) error {
		keys := tx.JobKeysOf([]Status{StatusPending, StatusReserved, StatusRunning, StatusCancelling})
		for round := 0; round < 1; round++ {
			f, _ := os.Open(path)
			ps := s.db.Info().PageSize
			high := uint64(tx.tx.Size()) / uint64(ps)
			w := &pageWalker{f: f, pageSize: ps, high: high, seen: make([]uint64, (high+63)/64)}
			t0 := time.Now()
			var br int
			leaves, err := leavesHolding(w, uint64(tx.tx.Bucket(bucketJobs).Root()), keys.ids, func(ids []uint64) error { _, _, err := advise(f, ps, ids); return err }, &br)
			t1 := time.Now()
			runs, n, err2 := advise(f, ps, leaves)
			t2 := time.Now()
			t.Logf("descent %v advise %v (%d runs %d bytes) %v %v", t1.Sub(t0), t2.Sub(t1), runs, n, err, err2)
			f.Close()
		}
		return nil
	})
}
