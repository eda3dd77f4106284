package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workron/workron/store"
)

// TestCompact grows a real state file, deletes most of it, and compacts
// it: the file shrinks, holds the same state, and opens as a store again.
func TestCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path, store.Options{NoSync: true, InitialMmapSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*store.Job
	for range 10 {
		for _, j := range insertJobs(t, st, 1000) {
			j.Output = strings.Repeat("x", 2000)
			jobs = append(jobs, j)
		}
	}
	update(t, st, func(tx *store.Tx) error {
		for _, j := range jobs {
			if err := tx.UpdateJob(j, j.Status, j.Seq); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, st, func(tx *store.Tx) error {
		for _, j := range jobs[100:] {
			if err := tx.DeleteJob(j); err != nil {
				return err
			}
		}
		return nil
	})
	sz, err := st.Size()
	if err != nil {
		t.Fatal(err)
	}
	if sz.FreeBytes() < sz.FileBytes/2 {
		t.Fatalf("after deleting 90%% of the jobs: %+v, want over half of the file free", sz)
	}
	want := digest(t, st)

	t.Run("RefusedWhileANodeHoldsTheFile", func(t *testing.T) {
		if _, err := store.Compact(path); !errors.Is(err, store.ErrInUse) {
			t.Fatalf("Compact of an open state file: %v, want ErrInUse", err)
		}
		if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused compaction left its temporary file: %v", err)
		}
	})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("ShrinksTheFileAndKeepsTheState", func(t *testing.T) {
		res, err := store.Compact(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if res.Before != sz.FileBytes || res.After != fi.Size() || res.After > sz.InUseBytes+sz.InUseBytes/2 {
			t.Fatalf("compacted %+v (file now %d); before: %+v; want it near what was in use", res, fi.Size(), sz)
		}
		t.Logf("state file %d -> %d bytes (%d in use before)", res.Before, res.After, sz.InUseBytes)
		again, err := store.Open(path, store.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		if got := digest(t, again); got != want {
			t.Fatalf("digest after compaction %s, want %s", got, want)
		}
		if err := again.Check(); err != nil {
			t.Fatal(err)
		}
		insertJobs(t, again, 10) // writable as before
	})
}
