package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// searchWorld draws random jobs and filters from small domains, so that
// filters match some jobs and miss others.
type searchWorld struct {
	r *rand.Rand
}

var (
	worldQueues   = []string{"default", "emails", "q:1", strings.Repeat("long-queue-", 14)} // the last one is hashed
	worldTypes    = []string{"", "", "resize", "send"}
	worldKeys     = []string{"", "", "user-1", "user-2"}
	worldScheds   = []string{"", "", "", "nightly"}
	worldMetaKeys = []string{"tenant", "region", "k"}
	worldMetaVals = []string{"", "acme", "globex", "\xfe", strings.Repeat("v", 200)} // the last one is hashed; "\xfe" is idxShared
)

func (w *searchWorld) pick(xs []string) string { return xs[w.r.IntN(len(xs))] }

func (w *searchWorld) job(seq uint64) *Job {
	j := &Job{ID: fmt.Sprintf("job-%d", seq), Seq: seq, Status: Statuses[w.r.IntN(len(Statuses))],
		Queue: w.pick(worldQueues), Type: w.pick(worldTypes), ConcurrencyKey: w.pick(worldKeys),
		Schedule: w.pick(worldScheds), CreatedAt: int64(seq / 3)}
	for range w.r.IntN(3) {
		if j.Metadata == nil {
			j.Metadata = map[string]string{}
		}
		j.Metadata[w.pick(worldMetaKeys)] = w.pick(worldMetaVals)
	}
	return j
}

func (w *searchWorld) query() ListQuery {
	var q ListQuery
	if w.r.IntN(2) == 0 {
		q.Status = Statuses[w.r.IntN(len(Statuses))]
	}
	for range w.r.IntN(4) {
		switch w.r.IntN(5) {
		case 0:
			q.Terms = append(q.Terms, IndexTerm{Field: FieldQueue, Value: w.pick(worldQueues)})
		case 1:
			q.Terms = append(q.Terms, IndexTerm{Field: FieldType, Value: w.pick(worldTypes)})
		case 2:
			q.Terms = append(q.Terms, IndexTerm{Field: FieldConcurrencyKey, Value: w.pick(worldKeys)})
		case 3:
			q.Terms = append(q.Terms, IndexTerm{Field: FieldSchedule, Value: w.pick(worldScheds)})
		case 4:
			q.Terms = append(q.Terms, IndexTerm{Field: FieldMetadata, Key: w.pick(worldMetaKeys), Value: w.pick(worldMetaVals)})
		}
	}
	if w.r.IntN(4) == 0 {
		q.Match = func(j *Job) bool { return j.Seq%2 == 0 }
	}
	if w.r.IntN(4) == 0 {
		q.After = uint64(w.r.IntN(40 << epochBits))
	}
	if w.r.IntN(4) == 0 {
		q.CreatedFrom = int64(w.r.IntN(14 << epochBits))
	}
	if w.r.IntN(4) == 0 {
		q.CreatedTo = int64(w.r.IntN(14 << epochBits))
	}
	return q
}

// bruteForce is what q selects, by reading every job: newest first.
func bruteForce(t *testing.T, st *Store, q ListQuery) []string {
	t.Helper()
	var out []string
	err := st.View(func(tx *Tx) error {
		return tx.ForEachJob("", func(j *Job) error {
			if j.Seq > q.After && (q.Before == 0 || j.Seq < q.Before) && selects(q, j) {
				out = append(out, j.ID)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(out)
	return out
}

// selects is ListQuery's contract, written apart from the store's code.
func selects(q ListQuery, j *Job) bool {
	ok := q.Status == "" || j.Status == q.Status
	ok = ok && (q.CreatedFrom == 0 || j.CreatedAt >= q.CreatedFrom) && (q.CreatedTo == 0 || j.CreatedAt < q.CreatedTo)
	for _, term := range q.Terms {
		got, has := map[string]string{FieldQueue: j.Queue, FieldType: j.Type,
			FieldConcurrencyKey: j.ConcurrencyKey, FieldSchedule: j.Schedule}[term.Field], true
		if term.Field == FieldMetadata {
			got, has = j.Metadata[term.Key]
		}
		ok = ok && has && got == term.Value
	}
	return ok && (q.Match == nil || q.Match(j))
}

// pageAll follows ListJobs' cursors to the end.
func pageAll(t *testing.T, st *Store, q ListQuery) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("list %+v does not end", q)
		}
		var (
			jobs []*Job
			next uint64
		)
		err := st.View(func(tx *Tx) error {
			var err error
			jobs, next, err = tx.ListJobs(q)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		if next == 0 {
			return out
		}
		q.Before = next
	}
}

func countAll(t *testing.T, st *Store, q ListQuery, budget int) int {
	t.Helper()
	total := 0
	for rounds := 0; ; rounds++ {
		if rounds > 100000 {
			t.Fatalf("count %+v does not end", q)
		}
		var (
			n     int
			exact bool
			next  uint64
		)
		err := st.View(func(tx *Tx) error {
			var err error
			n, exact, next, err = tx.CountJobs(q, budget)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if exact {
			return total
		}
		if next == 0 || (q.Before != 0 && next > q.Before) {
			t.Fatalf("count %+v: inexact with cursor %d", q, next)
		}
		q.Before = next
	}
}

// mutate applies one random change to the jobs (change), in a
// transaction of its own.
func mutate(t *testing.T, st *Store, w *searchWorld) {
	t.Helper()
	err := st.Update(func(tx *Tx) error {
		var ids []string
		if err := tx.ForEachJob("", func(j *Job) error { ids = append(ids, j.ID); return nil }); err != nil {
			return err
		}
		return change(tx, w, &ids, w.job)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// change applies one random change to the jobs of ids (kept up to date)
// in tx, through the Tx methods the FSM calls: an insert of job(seq), a
// status change, a delete (as retention does).
func change(tx *Tx, w *searchWorld, ids *[]string, job func(seq uint64) *Job) error {
	switch op := w.r.IntN(6); {
	case op < 3 || len(*ids) == 0:
		// Now and then a jump of seqs, so the jobs span many epochs
		// of the index (index.go).
		n := 1
		if w.r.IntN(8) == 0 {
			n += w.r.IntN(3 << epochBits)
		}
		first, err := tx.NextSeqs(n)
		if err != nil {
			return err
		}
		seq := first + uint64(n) - 1
		j := job(seq)
		*ids = append(*ids, j.ID)
		return tx.InsertJob(j, seq)
	case op < 5:
		j, err := tx.Job((*ids)[w.r.IntN(len(*ids))])
		if err != nil {
			return err
		}
		prev := j.Status
		j.Status = Statuses[w.r.IntN(len(Statuses))]
		return tx.UpdateJob(j, prev, 9)
	default:
		i := w.r.IntN(len(*ids))
		j, err := tx.Job((*ids)[i])
		if err != nil {
			return err
		}
		*ids = slices.Delete(*ids, i, i+1)
		return tx.DeleteJob(j)
	}
}

func TestSearchIndex(t *testing.T) {
	t.Run("StaysConsistentUnderInsertsStatusChangesAndDeletes", func(t *testing.T) {
		st := openInternal(t)
		w := &searchWorld{r: rand.New(rand.NewPCG(1, 2))}
		for i := range 300 {
			mutate(t, st, w)
			if err := st.Check(); err != nil {
				t.Fatalf("after change %d: %v", i, err)
			}
		}
	})
	t.Run("ListsAndCountsWhatABruteForceScanFinds", func(t *testing.T) {
		for seed := range uint64(4) {
			st := openInternal(t)
			w := &searchWorld{r: rand.New(rand.NewPCG(seed, 7))}
			for range 200 {
				mutate(t, st, w)
			}
			for i := range 150 {
				q := w.query()
				want := bruteForce(t, st, q)
				q.Limit = 1 + w.r.IntN(7)
				if got := pageAll(t, st, q); !slices.Equal(got, want) {
					t.Fatalf("seed %d query %d %+v: listed %v, want %v", seed, i, q, got, want)
				}
				if got := countAll(t, st, q, 0); got != len(want) {
					t.Fatalf("seed %d query %d %+v: counted %d, want %d", seed, i, q, got, len(want))
				}
				if got := countAll(t, st, q, 1+w.r.IntN(5)); got != len(want) {
					t.Fatalf("seed %d query %d %+v: counted %d in small budgets, want %d", seed, i, q, got, len(want))
				}
				q.Scan = 1 + w.r.IntN(4) // an examining budget pages on, not off
				if got := pageAll(t, st, q); !slices.Equal(got, want) {
					t.Fatalf("seed %d query %d %+v: listed %v with a scan budget, want %v", seed, i, q, got, want)
				}
			}
		}
	})
	t.Run("AListOfARareTermReadsOnlyItsMatches", func(t *testing.T) {
		st := openInternal(t)
		err := st.Update(func(tx *Tx) error {
			for seq := uint64(1); seq <= 500; seq++ {
				j := &Job{ID: fmt.Sprintf("job-%d", seq), Seq: seq, Status: StatusDone, Queue: "default"}
				if seq == 3 {
					j.Metadata = map[string]string{"tenant": "needle"}
				}
				if err := tx.InsertJob(j, seq); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		examined := 0
		q := ListQuery{Status: StatusDone, Terms: []IndexTerm{{Field: FieldMetadata, Key: "tenant", Value: "needle"}},
			Limit: 50, Scan: 1, Match: func(*Job) bool { examined++; return true }}
		got := pageAll(t, st, q)
		if !slices.Equal(got, []string{"job-3"}) || examined != 1 {
			t.Fatalf("listed %v after examining %d jobs, want job-3 alone, examined once", got, examined)
		}
	})
	t.Run("AWriteTransactionListsWhatItChanged", func(t *testing.T) {
		st := openInternal(t)
		err := st.Update(func(tx *Tx) error {
			j := &Job{ID: "a", Seq: 1, Status: StatusPending, Queue: "default", Metadata: map[string]string{"k": "v"}}
			if err := tx.InsertJob(j, 1); err != nil {
				return err
			}
			q := ListQuery{Terms: []IndexTerm{{Field: FieldMetadata, Key: "k", Value: "v"}}}
			if jobs, _, err := tx.ListJobs(q); err != nil || len(jobs) != 1 {
				return fmt.Errorf("listed %d jobs (%v) in the transaction that inserted it", len(jobs), err)
			}
			j.Status = StatusRunning
			if err := tx.UpdateJob(j, StatusPending, 2); err != nil {
				return err
			}
			n, exact, _, err := tx.CountJobs(ListQuery{Status: StatusPending, Terms: []IndexTerm{{Field: FieldQueue, Value: "default"}}}, 0)
			if err != nil || n != 0 || !exact {
				return fmt.Errorf("counted %d pending (%v, exact %v) after it started, want 0", n, err, exact)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ARolledBackTransactionLeavesNoEntries", func(t *testing.T) {
		st := openInternal(t)
		insert := func(id string, seq uint64, fail bool) error {
			return st.Update(func(tx *Tx) error {
				j := &Job{ID: id, Seq: seq, Status: StatusPending, Queue: "default", Metadata: map[string]string{"k": id}}
				if err := tx.InsertJob(j, seq); err != nil {
					return err
				}
				if fail {
					return errors.New("refused")
				}
				return nil
			})
		}
		if err := insert("a", 1, true); err == nil {
			t.Fatal("the failing update succeeded")
		}
		func() {
			defer func() { _ = recover() }()
			_ = st.Update(func(tx *Tx) error {
				if err := tx.InsertJob(&Job{ID: "b", Seq: 2, Queue: "default", Status: StatusPending}, 2); err != nil {
					return err
				}
				panic("apply failed")
			})
		}()
		if err := insert("c", 3, false); err != nil {
			t.Fatal(err)
		}
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
		if got := pageAll(t, st, ListQuery{Terms: []IndexTerm{{Field: FieldQueue, Value: "default"}}}); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("listed %v, want c alone", got)
		}
	})
	t.Run("ABadTermIsRefused", func(t *testing.T) {
		st := openInternal(t)
		for _, term := range []IndexTerm{{Field: "command", Value: "x"}, {Field: FieldMetadata, Value: "x"}} {
			err := st.View(func(tx *Tx) error {
				_, _, err := tx.ListJobs(ListQuery{Terms: []IndexTerm{term}})
				return err
			})
			if !errors.Is(err, ErrBadTerm) {
				t.Errorf("term %+v: %v, want ErrBadTerm", term, err)
			}
		}
	})
	t.Run("SeqAtTimeSplitsJobsByCreation", func(t *testing.T) {
		st := openInternal(t)
		w := &searchWorld{r: rand.New(rand.NewPCG(3, 3))}
		for range 100 {
			mutate(t, st, w)
		}
		for at := int64(-1); at < 12000; at += 97 {
			var got uint64
			err := st.View(func(tx *Tx) error {
				var err error
				got, err = tx.SeqAtTime(at)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			err = st.View(func(tx *Tx) error {
				return tx.ForEachJob("", func(j *Job) error {
					if (j.CreatedAt < at) != (j.Seq < got) {
						t.Errorf("at %d: SeqAtTime %d, but job %s (seq %d) was created at %d", at, got, j.ID, j.Seq, j.CreatedAt)
					}
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// toPreviousRelease makes st a state file as the release before the
// search index left it: no index bucket, no index meta keys.
func toPreviousRelease(t testing.TB, st *Store) {
	t.Helper()
	err := st.Update(func(tx *Tx) error {
		for _, k := range [][]byte{keyIndexFormat, keyIndexApplied, keyIndexBuilding} {
			if err := tx.tx.Bucket(bucketMeta).Delete(k); err != nil {
				return err
			}
		}
		return tx.tx.DeleteBucket(bucketIndex)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func randomStore(t *testing.T, seed uint64, changes int) *Store {
	t.Helper()
	st := openInternal(t)
	w := &searchWorld{r: rand.New(rand.NewPCG(seed, 1))}
	for range changes {
		mutate(t, st, w)
	}
	if err := st.Update(func(tx *Tx) error { return tx.SetApplied(77) }); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSearchIndexBuild(t *testing.T) {
	t.Run("AFileOfThePreviousReleaseGetsItAtOpen", func(t *testing.T) {
		st := randomStore(t, 1, 200)
		want := storeDigest(t, st)
		toPreviousRelease(t, st)
		st = reopen(t, st)
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
		if got := storeDigest(t, st); got != want {
			t.Error("digest after the build differs from the store that kept its index")
		}
	})
	t.Run("VerifyAcceptsAFileWithoutIt", func(t *testing.T) {
		st := randomStore(t, 2, 50)
		toPreviousRelease(t, st)
		path := st.Path()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if info, err := Verify(path); err != nil || info.Jobs == 0 {
			t.Fatalf("verify = %+v, %v", info, err)
		}
	})
	t.Run("AFileAnOlderReleaseWroteToIsBuiltAgain", func(t *testing.T) {
		st := randomStore(t, 3, 100)
		// The release before applies an entry: a job's status and the
		// applied index move, the index does not.
		var moved *Job
		err := st.Update(func(tx *Tx) error {
			c := tx.tx.Bucket(bucketJobs).Cursor()
			_, v := c.First()
			moved = new(Job)
			if err := decodeJob(v, moved); err != nil {
				return err
			}
			if err := tx.tx.Bucket(bucketStatus).Delete(statusKey(moved.Status, moved.Seq)); err != nil {
				return err
			}
			moved.Status = map[bool]Status{true: StatusFailed, false: StatusDone}[moved.Status == StatusDone]
			if err := tx.tx.Bucket(bucketStatus).Put(statusKey(moved.Status, moved.Seq), []byte(moved.ID)); err != nil {
				return err
			}
			if err := tx.putJob(moved); err != nil {
				return err
			}
			return tx.putMetaUint(keyApplied, 78)
		})
		if err != nil {
			t.Fatal(err)
		}
		st = reopen(t, st)
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
		q := ListQuery{Status: moved.Status, Terms: []IndexTerm{{Field: FieldQueue, Value: moved.Queue}}}
		if got := pageAll(t, st, q); !slices.Contains(got, moved.ID) {
			t.Fatalf("%+v lists %v, without job %s", q, got, moved.ID)
		}
	})
	t.Run("ABuildCutShortResumesAndEndsWithTheSameBytes", func(t *testing.T) {
		st := randomStore(t, 4, 200)
		want := storeDigest(t, st)
		toPreviousRelease(t, st)
		// A build that stopped after its first batch of 7.
		err := st.Update(func(tx *Tx) error {
			if _, err := tx.tx.CreateBucket(bucketIndex); err != nil {
				return err
			}
			last, _, err := tx.indexBatch(0, 7)
			if err != nil {
				return err
			}
			return tx.tx.Bucket(bucketMeta).Put(keyIndexBuilding, append(putUint(tx.Applied()), putUint(last)...))
		})
		if err != nil {
			t.Fatal(err)
		}
		st = reopen(t, st)
		if got := storeDigest(t, st); got != want {
			t.Error("digest after a resumed build differs")
		}
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ABuildOfAFileChangedSinceStartsOver", func(t *testing.T) {
		st := randomStore(t, 5, 100)
		want := storeDigest(t, st)
		err := st.Update(func(tx *Tx) error {
			// A stray key, and a marker from another applied index.
			if err := tx.tx.Bucket(bucketIndex).Put(appendIndexKey(nil, 1, idxType, "stray"), []byte{0, 1}); err != nil {
				return err
			}
			return tx.tx.Bucket(bucketMeta).Put(keyIndexBuilding, append(putUint(5), putUint(1000)...))
		})
		if err != nil {
			t.Fatal(err)
		}
		st = reopen(t, st)
		if got := storeDigest(t, st); got != want {
			t.Error("digest after a fresh build differs")
		}
	})
	t.Run("EveryBatchSizeBuildsTheSameBytes", func(t *testing.T) {
		st := randomStore(t, 6, 150)
		want := storeDigest(t, st)
		for _, batch := range []int{1, 3, 1000} {
			toPreviousRelease(t, st)
			if err := st.Update(func(tx *Tx) error { _, err := tx.tx.CreateBucketIfNotExists(bucketIndex); return err }); err != nil {
				t.Fatal(err)
			}
			if err := st.buildIndex(batch); err != nil {
				t.Fatal(err)
			}
			if got := storeDigest(t, st); got != want {
				t.Errorf("batch %d: digest differs", batch)
			}
		}
	})
	t.Run("ARestoredSnapshotOfThePreviousReleaseGetsIt", func(t *testing.T) {
		old := randomStore(t, 7, 100)
		want := storeDigest(t, old)
		toPreviousRelease(t, old)
		var snap bytes.Buffer
		sn, err := old.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sn.WriteTo(&snap); err != nil {
			t.Fatal(err)
		}
		sn.Close()
		st := openInternal(t)
		if err := st.Restore(&snap); err != nil {
			t.Fatal(err)
		}
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
		if got := storeDigest(t, st); got != want {
			t.Error("digest after restoring the previous release's snapshot differs")
		}
	})
}
