package store

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestZZPhases(t *testing.T) {
	path := os.Getenv("ZZ_PATH")
	if path == "" {
		t.Skip()
	}
	for round := 0; round < 2; round++ {
		cold := os.Getenv("ZZ_WARM") == ""
		if cold {
			f, _ := os.Open(path)
			unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			f.Close()
		}
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.View(func(tx *Tx) error {
			t0 := time.Now()
			if _, err := tx.JobCounts(); err != nil {
				t.Fatal(err)
			}
			t1 := time.Now()
			keys := tx.JobKeysOf([]Status{StatusPending, StatusReserved, StatusRunning, StatusCancelling})
			t2 := time.Now()
			var ra ReadAhead
			if os.Getenv("ZZ_NORA") == "" {
				ra, err = tx.ReadAheadJobs(keys)
			}
			t3 := time.Now()
			n := 0
			tx.ForEachJobHeadIn(keys, func(*JobHead) error { n++; return nil })
			t4 := time.Now()
			t.Logf("counts %v keys %v readahead %v (%+v %v) heads %v (%d)", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), ra, err, t4.Sub(t3), n)
			return nil
		})
		s.Close()
	}
}
