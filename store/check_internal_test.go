package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workron/workron/internal/flushpace"
)

// snapshotBuffer is a snapshot of st, written out.
func snapshotBuffer(t *testing.T, st *Store) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	sn, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, err = sn.WriteTo(&buf)
	sn.Close()
	if err != nil {
		t.Fatal(err)
	}
	return &buf
}

// openInternal opens a store for tests that reach past the API to break it.
func openInternal(t *testing.T) *Store {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestCheck(t *testing.T) {
	setup := func(t *testing.T) *Store {
		st := openInternal(t)
		err := st.Update(func(tx *Tx) error {
			for i, s := range []Status{StatusPending, StatusRunning} {
				seq, _ := tx.NextSeq()
				if err := tx.InsertJob(&Job{ID: []string{"a", "b"}[i], Seq: seq, Status: s}, seq); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Check(); err != nil {
			t.Fatalf("check of a sound store: %v", err)
		}
		return st
	}
	cases := []struct {
		name   string
		break_ func(tx *Tx) error
		want   string
	}{
		{"MissingStatusEntry", func(tx *Tx) error {
			return tx.tx.Bucket(bucketStatus).Delete(statusKey(StatusPending, 1))
		}, "status index"},
		{"StaleStatusEntry", func(tx *Tx) error {
			return tx.tx.Bucket(bucketStatus).Put(statusKey(StatusDone, 1), []byte("a"))
		}, "status index has 3 entries"},
		{"SeqEntryNamesAnotherJob", func(tx *Tx) error {
			return tx.tx.Bucket(bucketSeq).Put(putUint(1), []byte("b"))
		}, "seq index"},
		{"OrphanSeqEntry", func(tx *Tx) error {
			return tx.tx.Bucket(bucketSeq).Put(putUint(9), []byte("gone"))
		}, "seq index has 3 entries"},
		{"MissingExpiryEntry", func(tx *Tx) error {
			j, err := tx.Job("a")
			if err != nil {
				return err
			}
			j.ExpireAt = 50 // set without SetExpiry
			return tx.UpdateJob(j, j.Status, 5)
		}, "expiry index"},
		{"StaleExpiryEntry", func(tx *Tx) error {
			return tx.tx.Bucket(bucketExpiry).Put(expiryKey(10, 1), []byte("a"))
		}, "expiry index has 1 entries for 0 expiring jobs"},
		{"UpdateWithTheWrongPreviousStatus", func(tx *Tx) error {
			j, err := tx.Job("a")
			if err != nil {
				return err
			}
			j.Status = StatusDone
			return tx.UpdateJob(j, StatusRunning, 5) // was pending
		}, "status index"},
		{"MissingSearchEntry", func(tx *Tx) error {
			return tx.tx.Bucket(bucketIndex).Delete(append(appendEpochKey(nil, idxStatusQueue, 0, appendParts(nil, string(StatusPending))), idxShared))
		}, "lacks it"},
		{"StaleSearchEntry", func(tx *Tx) error {
			return tx.tx.Bucket(bucketIndex).Put(appendIndexKey(nil, 1, idxType, "gone"), []byte{0, 1, 0, 2})
		}, "search index lists hold 4 entries for 2 of the jobs' terms"},
		{"StaleSharedEntry", func(tx *Tx) error {
			k := append(appendEpochKey(nil, idxType, 0, nil), idxShared)
			return tx.tx.Bucket(bucketIndex).Put(k, appendShared(nil, []sharedEntry{{term: appendParts(nil, "gone"), low: 1}}))
		}, "search index lists hold 3 entries for 2 of the jobs' terms"},
		{"ListOfOneJob", func(tx *Tx) error {
			return tx.tx.Bucket(bucketIndex).Put(appendIndexKey(nil, 1, idxType, "x"), []byte{0, 1})
		}, "belongs in the shared list"},
		{"MalformedSharedList", func(tx *Tx) error {
			k := append(appendEpochKey(nil, idxType, 0, nil), idxShared)
			return tx.tx.Bucket(bucketIndex).Put(k, []byte{0, 9, 0})
		}, "malformed"},
		{"UnsortedSearchList", func(tx *Tx) error {
			return tx.tx.Bucket(bucketIndex).Put(appendIndexKey(nil, 1, idxType, "x"), []byte{0, 2, 0, 1})
		}, "not sorted lows"},
		{"QueueChangedInPlace", func(tx *Tx) error {
			j, err := tx.Job("a")
			if err != nil {
				return err
			}
			j.Queue = "other" // queues never change after a submit
			return tx.UpdateJob(j, j.Status, 5)
		}, "lacks it"},
	}
	for _, c := range cases {
		t.Run(c.name+"IsReported", func(t *testing.T) {
			st := setup(t)
			if err := st.Update(c.break_); err != nil {
				t.Fatal(err)
			}
			err := st.Check()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("check = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestOpenRefusesANewerFormat(t *testing.T) {
	st := openInternal(t)
	path := st.Path()
	if err := st.Update(func(tx *Tx) error { return tx.putMetaUint(keyFormat, currentFormat+1) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := Open(path, Options{})
	if err == nil {
		st2.Close()
		t.Fatal("opened a state file of a newer format")
	}
	if want := fmt.Sprintf("state format %d", currentFormat+1); !strings.Contains(err.Error(), want) {
		t.Fatalf("open err = %v, want it to name the format", err)
	}
}

func TestRestoreRefusesANewerFormatAndKeepsOldState(t *testing.T) {
	newer := openInternal(t)
	if err := newer.Update(func(tx *Tx) error { return tx.putMetaUint(keyFormat, currentFormat+1) }); err != nil {
		t.Fatal(err)
	}
	buf := snapshotBuffer(t, newer)

	st := openInternal(t)
	if err := st.Update(func(tx *Tx) error { return tx.SetApplied(7) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Restore(buf); err == nil {
		t.Fatal("restored a snapshot of a newer state format")
	}
	err := st.View(func(tx *Tx) error {
		if tx.Applied() != 7 {
			t.Errorf("applied after failed restore = %d, want 7", tx.Applied())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("store unusable after failed restore: %v", err)
	}
}

func TestRestoreSyncsAsItWrites(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "restore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &syncingWriter{f: f, pace: flushpace.New(f, restoreSyncBytes)}
	chunk := make([]byte, 1<<20)
	for range 10 {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if w.pace.Flushes() != 10/(restoreSyncBytes>>20) {
		t.Fatalf("10 MiB written: %d flushes, want one every %d MiB", w.pace.Flushes(), restoreSyncBytes>>20)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 10<<20 {
		t.Fatalf("file size %d, want %d", st.Size(), 10<<20)
	}
}
