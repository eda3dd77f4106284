package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// toJSON rewrites the records of the given jobs (every job if none given)
// in JSON, as state format 1 wrote them.
func toJSON(t testing.TB, st *Store, ids ...string) {
	t.Helper()
	err := st.Update(func(tx *Tx) error {
		var jobs []*Job
		err := tx.ForEachJob("", func(j *Job) error {
			if len(ids) == 0 || slices.Contains(ids, j.ID) {
				jobs = append(jobs, j)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if err := putJSONJob(tx, j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// toFormat1 rewrites st as a state file of format 1 would hold it: every
// job record in JSON, the format stamp 1.
func toFormat1(t *testing.T, st *Store) {
	t.Helper()
	toJSON(t, st)
	if err := st.Update(func(tx *Tx) error { return tx.putMetaUint(keyFormat, 1) }); err != nil {
		t.Fatal(err)
	}
}

func insertTestJobs(t *testing.T, st *Store) []*Job {
	t.Helper()
	jobs := []*Job{typicalJob(), fullJob(), {ID: "job-7", Seq: 7, Queue: "default", Status: StatusPending}}
	jobs[1].Status = StatusRunning
	jobs[1].Dependents = nil // format 3 keeps them apart; TestStateFormat2 moves them
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

func reopen(t *testing.T, st *Store) *Store {
	t.Helper()
	path := st.Path()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// checkBinary checks that st is of the current format, done upgrading, and
// holds want, every job record binary.
func checkBinary(t *testing.T, st *Store, want []*Job) {
	t.Helper()
	err := st.View(func(tx *Tx) error {
		if f := tx.metaUint(keyFormat); f != currentFormat {
			t.Errorf("format %d, want %d", f, currentFormat)
		}
		if tx.tx.Bucket(bucketMeta).Get(keyUpgrading) != nil {
			t.Error("still marked upgrading")
		}
		err := tx.tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			if v[0] != jobRecordV1 && v[0] != jobRecordV2 {
				t.Errorf("job %s: record starts %q", k, v[0])
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, w := range want {
			got, err := tx.Job(w.ID)
			if err != nil {
				return err
			}
			if !bytes.Equal(mustAppendJob(t, got), mustAppendJob(t, w)) {
				t.Errorf("job %s read back as %+v, want %+v", w.ID, got, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
}

func TestStateFormat1(t *testing.T) {
	t.Run("OpenRewritesItsJobsInBinary", func(t *testing.T) {
		st := openInternal(t)
		jobs := insertTestJobs(t, st)
		want := storeDigest(t, st)
		toFormat1(t, st)
		st = reopen(t, st)
		checkBinary(t, st, jobs)
		if storeDigest(t, st) != want {
			t.Error("digest after the upgrade differs from the binary store's")
		}
	})
	t.Run("AnUpgradeCutShortResumesAtTheNextOpen", func(t *testing.T) {
		st := openInternal(t)
		jobs := insertTestJobs(t, st)
		toJSON(t, st, jobs[0].ID, jobs[2].ID)
		if err := st.Update(func(tx *Tx) error { return tx.tx.Bucket(bucketMeta).Put(keyUpgrading, []byte{1}) }); err != nil {
			t.Fatal(err)
		}
		checkBinary(t, reopen(t, st), jobs)
	})
	t.Run("RewriteGoesInBatches", func(t *testing.T) {
		st := openInternal(t)
		var jobs []*Job
		err := st.Update(func(tx *Tx) error {
			for i := range 7 {
				j := &Job{ID: fmt.Sprintf("job-%d", i), Seq: uint64(i + 1), Status: StatusDone}
				jobs = append(jobs, j)
				if err := tx.InsertJob(j, 1); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		toJSON(t, st, "job-0", "job-2", "job-3", "job-4", "job-6")
		if err := st.rewriteJobs(2); err != nil {
			t.Fatal(err)
		}
		checkBinary(t, st, jobs)
	})
	t.Run("ItsSnapshotRestores", func(t *testing.T) {
		old := openInternal(t)
		jobs := insertTestJobs(t, old)
		toFormat1(t, old)
		buf := snapshotBuffer(t, old)
		st := openInternal(t)
		if err := st.Restore(buf); err != nil {
			t.Fatalf("restore a snapshot of format 1: %v", err)
		}
		checkBinary(t, st, jobs)
	})
}

// TestJSONRecordsStayReadable: a job record in JSON (which Open rewrites,
// but which a crash in the middle of that leaves until the next Open) reads
// as the same job, whole or its head.
func TestJSONRecordsStayReadable(t *testing.T) {
	st := openInternal(t)
	jobs := insertTestJobs(t, st)
	toJSON(t, st, jobs[1].ID)
	midUpgrade := func(tx *Tx) error { // as a crash leaves a file of format 1: no heads kept
		if err := tx.tx.Bucket(bucketMeta).Put(keyUpgrading, []byte{1}); err != nil {
			return err
		}
		return tx.tx.Bucket(bucketMeta).Delete(keyHeadsApplied)
	}
	if err := st.Update(midUpgrade); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	err := st.View(func(tx *Tx) error {
		got, err := tx.Job(jobs[1].ID)
		if err != nil {
			return err
		}
		if !bytes.Equal(mustAppendJob(t, got), mustAppendJob(t, jobs[1])) {
			t.Errorf("job read back as %+v, want %+v", got, jobs[1])
		}
		return tx.ForEachJobHead(func(h *JobHead) error {
			for _, j := range jobs {
				if j.ID == h.ID && !reflect.DeepEqual(*h, j.Head()) {
					t.Errorf("head %+v, want %+v", *h, j.Head())
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
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
			j.ExpireAt = 0 // no expiry entry, so that Check below holds
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
	// The seq and status index entries hold ids kept in the arena too.
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRewriteJobs times what the first Open of a state file of format 1
// adds: rewriting 200,000 JSON job records in binary.
func BenchmarkRewriteJobs(b *testing.B) {
	st, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const n = 200000
	for done := 0; done < n; done += rewriteBatch {
		err := st.Update(func(tx *Tx) error {
			for i := done; i < done+rewriteBatch; i++ {
				j := typicalJob()
				j.ID, j.Seq = fmt.Sprintf("job-%d", i+1), uint64(i+1)
				if err := putJSONJob(tx, j); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := st.rewriteJobs(rewriteBatch); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		toJSON(b, st)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
}

// putJSONJob stores j as state format 1 wrote it: a JSON record.
func putJSONJob(tx *Tx, j *Job) error {
	v, err := encodeJSON(j)
	if err != nil {
		return err
	}
	return tx.tx.Bucket(bucketJobs).Put([]byte(j.ID), v)
}

// TestStateFormat2: a state file of format 2 kept each job's dependents in
// its record; Open moves them into the dependency bucket.
func TestStateFormat2(t *testing.T) {
	// parent <- a, b (by depends_on), c (runs after it); "gone" was deleted;
	// "reused" is a later job under a deleted dependent's id that does not
	// depend on parent.
	jobs := []*Job{
		{ID: "parent", Seq: 1, Status: StatusPending, Dependents: []string{"a", "gone", "b", "reused", "c"}},
		{ID: "a", Seq: 2, Status: StatusBlocked, DependsOn: []string{"parent"}, Waiting: 1, Dependents: []string{"b"}},
		{ID: "b", Seq: 3, Status: StatusBlocked, DependsOn: []string{"parent", "a"}, Waiting: 2},
		{ID: "c", Seq: 5, Status: StatusBlocked, After: "parent", Waiting: 1},
		{ID: "reused", Seq: 6, Status: StatusPending},
	}
	write := func(t *testing.T, st *Store, format uint64, jobs []*Job) {
		t.Helper()
		err := st.Update(func(tx *Tx) error {
			for _, j := range jobs {
				j := *j
				if format == currentFormat {
					j.Dependents = nil
				}
				if err := tx.InsertJob(&j, 4); err != nil {
					return err
				}
			}
			if format == currentFormat {
				for _, e := range [][2]int{{0, 1}, {0, 2}, {0, 3}, {1, 2}} {
					if err := tx.AddDependent(jobs[e[0]].Seq, jobs[e[1]]); err != nil {
						return err
					}
				}
			}
			return tx.putMetaUint(keyFormat, format)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fresh := openInternal(t)
	write(t, fresh, currentFormat, jobs)
	old := openInternal(t)
	write(t, old, 2, jobs)
	st := reopen(t, old)
	err := st.View(func(tx *Tx) error {
		if f := tx.metaUint(keyFormat); f != currentFormat {
			t.Errorf("format %d, want %d", f, currentFormat)
		}
		for id, want := range map[string][]string{"parent": {"a", "b", "c"}, "a": {"b"}, "b": nil} {
			j, err := tx.Job(id)
			if err != nil {
				return err
			}
			if got := tx.Dependents(j.Seq); !slices.Equal(got, want) || len(j.Dependents) != 0 {
				t.Errorf("%s: dependents %v, record's list %v; want %v, empty", id, got, j.Dependents, want)
			}
			if n := tx.DependentCount(j.Seq); n != len(want) {
				t.Errorf("%s: count %d, want %d", id, n, len(want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	if storeDigest(t, st) != storeDigest(t, fresh) {
		t.Error("digest after the upgrade differs from a store written in format 3")
	}
}
