package store

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// toFormat1 rewrites st as a state file of format 1 would hold it: every
// job record in JSON, the format stamp 1.
func toFormat1(t *testing.T, st *Store) {
	t.Helper()
	err := st.Update(func(tx *Tx) error {
		var jobs []*Job
		err := tx.ForEachJob("", func(j *Job) error {
			jobs = append(jobs, j)
			return nil
		})
		if err != nil {
			return err
		}
		for _, j := range jobs {
			v, err := encodeJSON(j)
			if err != nil {
				return err
			}
			if err := tx.tx.Bucket(bucketJobs).Put([]byte(j.ID), v); err != nil {
				return err
			}
		}
		return tx.putMetaUint(keyFormat, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func insertTestJobs(t *testing.T, st *Store) []*Job {
	t.Helper()
	jobs := []*Job{typicalJob(), fullJob(), {ID: "job-7", Seq: 7, Queue: "default", Status: StatusPending}}
	jobs[1].Status = StatusRunning
	err := st.Update(func(tx *Tx) error {
		for _, j := range jobs {
			if err := tx.InsertJob(j, 3); err != nil {
				return err
			}
			if err := tx.SetExpiry(j, j.ExpireAt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func storeDigest(t *testing.T, st *Store) string {
	t.Helper()
	d, err := st.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestStateFormat1(t *testing.T) {
	setup := func(t *testing.T) (st *Store, jobs []*Job, binaryDigest string) {
		st = openInternal(t)
		jobs = insertTestJobs(t, st)
		binaryDigest = storeDigest(t, st)
		toFormat1(t, st)
		path := st.Path()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatalf("open a state file of format 1: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st, jobs, binaryDigest
	}
	t.Run("OpensReadsAndStampsFormat2", func(t *testing.T) {
		st, jobs, _ := setup(t)
		err := st.View(func(tx *Tx) error {
			if f := tx.metaUint(keyFormat); f != currentFormat {
				t.Errorf("format after open %d, want %d", f, currentFormat)
			}
			for _, want := range jobs {
				got, err := tx.Job(want.ID)
				if err != nil {
					return err
				}
				if !bytes.Equal(mustAppendJob(t, got), mustAppendJob(t, want)) {
					t.Errorf("job %s read from JSON as %+v, want %+v", want.ID, got, want)
				}
			}
			return tx.ForEachJobHead(func(h *JobHead) error {
				for _, want := range jobs {
					if want.ID == h.ID && !reflect.DeepEqual(*h, want.Head()) {
						t.Errorf("head %+v, want %+v", *h, want.Head())
					}
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Check(); err != nil {
			t.Fatalf("check: %v", err)
		}
	})
	t.Run("DigestEqualsTheBinaryStates", func(t *testing.T) {
		st, _, want := setup(t)
		if got := storeDigest(t, st); got != want {
			t.Fatal("the same jobs in JSON records give another digest than in binary ones")
		}
	})
	t.Run("AChangedJobIsWrittenBinary", func(t *testing.T) {
		st, jobs, want := setup(t)
		err := st.Update(func(tx *Tx) error {
			j, err := tx.Job(jobs[2].ID)
			if err != nil {
				return err
			}
			if err := tx.UpdateJob(j, j.Status, j.ModifyIndex); err != nil {
				return err
			}
			if v := tx.tx.Bucket(bucketJobs).Get([]byte(j.ID)); v[0] != jobRecordV1 {
				t.Errorf("rewritten record starts %q", v[0])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := storeDigest(t, st); got != want {
			t.Fatal("digest changed when a JSON record was rewritten in binary")
		}
	})
	t.Run("ItsSnapshotRestores", func(t *testing.T) {
		old := openInternal(t)
		insertTestJobs(t, old)
		toFormat1(t, old)
		var buf bytes.Buffer
		sn, err := old.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		_, err = sn.WriteTo(&buf)
		sn.Close()
		if err != nil {
			t.Fatal(err)
		}
		st := openInternal(t)
		if err := st.Restore(&buf); err != nil {
			t.Fatalf("restore a snapshot of format 1: %v", err)
		}
		if err := st.Check(); err != nil {
			t.Fatalf("check: %v", err)
		}
	})
}

// TestTxArenaKeepsEveryRecord writes many records of growing sizes in one
// transaction, across several of its arena's chunks, and reads them back.
func TestTxArenaKeepsEveryRecord(t *testing.T) {
	st := openInternal(t)
	var want []*Job
	err := st.Update(func(tx *Tx) error {
		for i := range 300 {
			seq, err := tx.NextSeq()
			if err != nil {
				return err
			}
			j := typicalJob()
			j.ID, j.Seq, j.Output = fmt.Sprintf("job-%d", seq), seq, strings.Repeat("x", i*i/10)
			if err := tx.InsertJob(j, seq); err != nil {
				return err
			}
			want = append(want, j)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(func(tx *Tx) error {
		for _, w := range want {
			got, err := tx.Job(w.ID)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("job %s read back as %+v", w.ID, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
