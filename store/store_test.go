package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workron/workron/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestStore opens a state file in a fresh temp dir; cleanup checks the
// indexes and closes it.
func newTestStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Check(); err != nil {
			t.Errorf("store check at cleanup: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

func update(t *testing.T, st *store.Store, fn func(tx *store.Tx) error) {
	t.Helper()
	if err := st.Update(fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// insertJobs stores n jobs numbered by NextSeq, in the given statuses by
// turn, and returns them in submission order.
func insertJobs(t *testing.T, st *store.Store, n int, statuses ...store.Status) []*store.Job {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []store.Status{store.StatusPending}
	}
	var out []*store.Job
	update(t, st, func(tx *store.Tx) error {
		for i := 0; i < n; i++ {
			seq, err := tx.NextSeq()
			if err != nil {
				return err
			}
			j := &store.Job{
				ID:     fmt.Sprintf("job-%d", seq),
				Seq:    seq,
				Queue:  "default",
				Status: statuses[i%len(statuses)],
			}
			if err := tx.InsertJob(j, seq); err != nil {
				return err
			}
			out = append(out, j)
		}
		return nil
	})
	return out
}

func ids(jobs []*store.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func list(t *testing.T, st *store.Store, q store.ListQuery) ([]string, uint64) {
	t.Helper()
	var (
		jobs []*store.Job
		next uint64
	)
	err := st.View(func(tx *store.Tx) error {
		var err error
		jobs, next, err = tx.ListJobs(q)
		return err
	})
	if err != nil {
		t.Fatalf("list %+v: %v", q, err)
	}
	return ids(jobs), next
}

// listAll pages through a query Limit at a time and returns every id.
func listAll(t *testing.T, st *store.Store, q store.ListQuery) []string {
	t.Helper()
	var all []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("list %+v: pagination does not end", q)
		}
		page, next := list(t, st, q)
		all = append(all, page...)
		if next == 0 {
			return all
		}
		if q.Before != 0 && next >= q.Before {
			t.Fatalf("list %+v: cursor went from %d to %d", q, q.Before, next)
		}
		q.Before = next
	}
}

func digest(t *testing.T, st *store.Store) string {
	t.Helper()
	d, err := st.Digest()
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	return d
}

func snapshotBytes(t *testing.T, st *store.Store) []byte {
	t.Helper()
	sn, err := st.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer sn.Close()
	var buf bytes.Buffer
	n, err := sn.WriteTo(&buf)
	if err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	if n != int64(buf.Len()) || n != sn.Size() {
		t.Fatalf("snapshot wrote %d bytes, buffer has %d, Size says %d", n, buf.Len(), sn.Size())
	}
	sn.Close() // a second Close must be harmless
	return buf.Bytes()
}

func TestStoreJobs(t *testing.T) {
	t.Run("InsertUpdateDeleteKeepIndexesConsistent", func(t *testing.T) {
		st := newTestStore(t)
		jobs := insertJobs(t, st, 5)
		update(t, st, func(tx *store.Tx) error {
			j := jobs[1]
			prev := j.Status
			j.Status = store.StatusRunning
			if err := tx.UpdateJob(j, prev, 10); err != nil {
				return err
			}
			// An update that keeps the status must not disturb the index.
			j.Attempts = 3
			if err := tx.UpdateJob(j, j.Status, 11); err != nil {
				return err
			}
			return tx.DeleteJob(jobs[3])
		})
		if err := st.Check(); err != nil {
			t.Fatalf("check after update and delete: %v", err)
		}
		err := st.View(func(tx *store.Tx) error {
			j, err := tx.Job("job-2")
			if err != nil {
				return err
			}
			if j.Status != store.StatusRunning || j.Attempts != 3 || j.ModifyIndex != 11 {
				t.Errorf("job-2 = status %s attempts %d mod %d, want running 3 11", j.Status, j.Attempts, j.ModifyIndex)
			}
			if _, err := tx.Job("job-4"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("deleted job-4: err %v, want ErrNotFound", err)
			}
			if tx.HasJob("job-4") || !tx.HasJob("job-5") {
				t.Errorf("HasJob: job-4 %v job-5 %v, want false true", tx.HasJob("job-4"), tx.HasJob("job-5"))
			}
			var pending []string
			err = tx.ForEachJob(store.StatusPending, func(j *store.Job) error {
				pending = append(pending, j.ID)
				return nil
			})
			if want := []string{"job-1", "job-3", "job-5"}; !slices.Equal(pending, want) {
				t.Errorf("pending oldest first = %v, want %v", pending, want)
			}
			var all []string
			err = errors.Join(err, tx.ForEachJob("", func(j *store.Job) error {
				all = append(all, j.ID)
				return nil
			}))
			if want := []string{"job-1", "job-2", "job-3", "job-5"}; !slices.Equal(all, want) {
				t.Errorf("all oldest first = %v, want %v", all, want)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NextSeqStartsAtOneAndNeverRepeats", func(t *testing.T) {
		st := newTestStore(t)
		var got []uint64
		for i := 0; i < 3; i++ {
			update(t, st, func(tx *store.Tx) error {
				n, err := tx.NextSeq()
				got = append(got, n)
				return err
			})
		}
		if want := []uint64{1, 2, 3}; !slices.Equal(got, want) {
			t.Fatalf("NextSeq = %v, want %v", got, want)
		}
	})

	t.Run("NextSeqsAllocatesWhatAsManyNextSeqsWould", func(t *testing.T) {
		st := newTestStore(t)
		var got []uint64
		update(t, st, func(tx *store.Tx) error {
			a, err1 := tx.NextSeq()
			b, err2 := tx.NextSeqs(1000)
			c, err3 := tx.NextSeq()
			_, err4 := tx.NextSeqs(0)
			got = append(got, a, b, c)
			if err4 == nil {
				t.Error("NextSeqs(0) allocated")
			}
			return errors.Join(err1, err2, err3)
		})
		if want := []uint64{1, 2, 1002}; !slices.Equal(got, want) {
			t.Fatalf("NextSeq, NextSeqs(1000), NextSeq = %v, want %v", got, want)
		}
	})

	t.Run("IdempotencyKeysHoldAnIDAndAnEnd", func(t *testing.T) {
		st := newTestStore(t)
		jobs := insertJobs(t, st, 2)
		update(t, st, func(tx *store.Tx) error {
			return errors.Join(tx.PutIdempotencyKey("k1", "job-1", 0), tx.PutIdempotencyKey("k2", "job-2", 500),
				tx.PutIdempotencyKey("gone", "job-1", 0), tx.DeleteIdempotencyKey("gone"))
		})
		// Deleting a job leaves its key to the caller.
		update(t, st, func(tx *store.Tx) error { return tx.DeleteJob(jobs[1]) })
		err := st.View(func(tx *store.Tx) error {
			if id, until, err := tx.IdempotencyKey("k1"); err != nil || id != "job-1" || until != 0 {
				t.Errorf("k1 = %q until %d, %v; want job-1 until 0", id, until, err)
			}
			if id, until, err := tx.IdempotencyKey("k2"); err != nil || id != "job-2" || until != 500 {
				t.Errorf("k2 = %q until %d, %v; want job-2 until 500", id, until, err)
			}
			if _, _, err := tx.IdempotencyKey("gone"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("deleted key: err %v, want ErrNotFound", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ExpiryIndexListsDueJobsEarliestFirst", func(t *testing.T) {
		st := newTestStore(t)
		jobs := insertJobs(t, st, 5, store.StatusDone)
		setExpiry := func(j *store.Job, at int64) {
			t.Helper()
			update(t, st, func(tx *store.Tx) error {
				return errors.Join(tx.SetExpiry(j, at), tx.UpdateJob(j, j.Status, 9))
			})
		}
		setExpiry(jobs[0], 300)
		setExpiry(jobs[1], 100)
		setExpiry(jobs[2], 200)
		setExpiry(jobs[3], 100)
		setExpiry(jobs[4], 50)
		setExpiry(jobs[2], 400) // moved later
		setExpiry(jobs[4], 0)   // no longer expires
		expired := func(now int64, limit int) []string {
			var out []string
			err := st.View(func(tx *store.Tx) error { out = tx.Expired(now, limit); return nil })
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		if got, want := expired(99, 10), []string(nil); !slices.Equal(got, want) {
			t.Errorf("expired at 99 = %v, want none", got)
		}
		if got, want := expired(350, 10), []string{"job-2", "job-4", "job-1"}; !slices.Equal(got, want) {
			t.Errorf("expired at 350 = %v, want %v (by time, then submission)", got, want)
		}
		if got, want := expired(1000, 2), []string{"job-2", "job-4"}; !slices.Equal(got, want) {
			t.Errorf("expired at 1000 limit 2 = %v, want %v", got, want)
		}
		if err := st.Check(); err != nil {
			t.Fatal(err)
		}
		// Deleting a job takes it out of the expiry index.
		update(t, st, func(tx *store.Tx) error { return tx.DeleteJob(jobs[1]) })
		if got, want := expired(1000, 10), []string{"job-4", "job-1", "job-3"}; !slices.Equal(got, want) {
			t.Errorf("expired after delete = %v, want %v", got, want)
		}
	})

	t.Run("WritesFailOnAReadTransaction", func(t *testing.T) {
		st := newTestStore(t)
		err := st.View(func(tx *store.Tx) error {
			return tx.InsertJob(&store.Job{ID: "job-1", Seq: 1, Status: store.StatusPending}, 1)
		})
		if err == nil {
			t.Fatal("InsertJob in a read transaction succeeded")
		}
	})

	t.Run("FailedUpdateRollsBack", func(t *testing.T) {
		st := newTestStore(t)
		insertJobs(t, st, 1)
		before := digest(t, st)
		boom := errors.New("boom")
		err := st.Update(func(tx *store.Tx) error {
			if _, err := tx.NextSeq(); err != nil {
				return err
			}
			if err := tx.InsertJob(&store.Job{ID: "job-2", Seq: 2, Status: store.StatusPending}, 2); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("update err = %v, want boom", err)
		}
		if after := digest(t, st); after != before {
			t.Fatal("a failed update changed the state")
		}
	})
}

func TestStoreListJobs(t *testing.T) {
	// Statuses in an order whose names do not sort the way the jobs do, so
	// a status listing must skip other statuses' keys on both sides.
	statuses := []store.Status{store.StatusPending, store.StatusRunning, store.StatusBlocked, store.StatusDone, store.StatusFailed, store.StatusCancelled, store.StatusCancelling}
	setup := func(t *testing.T) (*store.Store, []*store.Job) {
		st := newTestStore(t)
		return st, insertJobs(t, st, 30, statuses...)
	}
	want := func(jobs []*store.Job, keep func(*store.Job) bool) []string {
		var out []string
		for i := len(jobs) - 1; i >= 0; i-- {
			if keep(jobs[i]) {
				out = append(out, jobs[i].ID)
			}
		}
		return out
	}

	t.Run("AllJobsNewestFirst", func(t *testing.T) {
		st, jobs := setup(t)
		got, next := list(t, st, store.ListQuery{})
		if w := want(jobs, func(*store.Job) bool { return true }); !slices.Equal(got, w) {
			t.Fatalf("list = %v, want %v", got, w)
		}
		if next != 0 {
			t.Fatalf("next = %d, want 0 for the last page", next)
		}
	})

	t.Run("EachStatusListsExactlyItsJobs", func(t *testing.T) {
		st, jobs := setup(t)
		for _, s := range store.Statuses {
			got, _ := list(t, st, store.ListQuery{Status: s})
			w := want(jobs, func(j *store.Job) bool { return j.Status == s })
			if !slices.Equal(got, w) {
				t.Errorf("status %s: list = %v, want %v", s, got, w)
			}
		}
	})

	t.Run("BeforeCursorPagesWithoutGapsOrRepeats", func(t *testing.T) {
		st, jobs := setup(t)
		for _, s := range append([]store.Status{""}, store.Statuses...) {
			for _, limit := range []int{1, 2, 3, 7, 100} {
				got := listAll(t, st, store.ListQuery{Status: s, Limit: limit})
				w := want(jobs, func(j *store.Job) bool { return s == "" || j.Status == s })
				if !slices.Equal(got, w) {
					t.Errorf("status %q limit %d: pages = %v, want %v", s, limit, got, w)
				}
			}
		}
	})

	t.Run("LimitReturnsTheNewestAndACursor", func(t *testing.T) {
		st, _ := setup(t)
		got, next := list(t, st, store.ListQuery{Limit: 3})
		if w := []string{"job-30", "job-29", "job-28"}; !slices.Equal(got, w) || next != 28 {
			t.Fatalf("list = %v next %d, want %v next 28", got, next, w)
		}
		got, next = list(t, st, store.ListQuery{Limit: 3, Before: next})
		if w := []string{"job-27", "job-26", "job-25"}; !slices.Equal(got, w) || next != 25 {
			t.Fatalf("second page = %v next %d, want %v next 25", got, next, w)
		}
	})

	t.Run("BeforeBoundsTheFirstPage", func(t *testing.T) {
		st, _ := setup(t)
		got, next := list(t, st, store.ListQuery{Before: 4})
		if w := []string{"job-3", "job-2", "job-1"}; !slices.Equal(got, w) || next != 0 {
			t.Fatalf("list before 4 = %v next %d, want %v next 0", got, next, w)
		}
		got, _ = list(t, st, store.ListQuery{Before: 1})
		if len(got) != 0 {
			t.Fatalf("list before 1 = %v, want nothing", got)
		}
		got, _ = list(t, st, store.ListQuery{Before: 1000, Limit: 1})
		if w := []string{"job-30"}; !slices.Equal(got, w) {
			t.Fatalf("list before 1000 = %v, want %v", got, w)
		}
	})

	t.Run("MatchFiltersAndStillPages", func(t *testing.T) {
		st, jobs := setup(t)
		even := func(j *store.Job) bool { return j.Seq%2 == 0 }
		got := listAll(t, st, store.ListQuery{Match: even, Limit: 4})
		if w := want(jobs, even); !slices.Equal(got, w) {
			t.Fatalf("matched pages = %v, want %v", got, w)
		}
		got = listAll(t, st, store.ListQuery{Status: store.StatusPending, Match: even, Limit: 2})
		w := want(jobs, func(j *store.Job) bool { return j.Status == store.StatusPending && even(j) })
		if !slices.Equal(got, w) {
			t.Fatalf("pending matched pages = %v, want %v", got, w)
		}
	})

	t.Run("ScanCapEndsAPageEarlyWithAResumableCursor", func(t *testing.T) {
		st, jobs := setup(t)
		none := func(*store.Job) bool { return false }
		got, next := list(t, st, store.ListQuery{Match: none, Scan: 5})
		if len(got) != 0 || next == 0 {
			t.Fatalf("scan-capped list = %v next %d, want nothing and a cursor", got, next)
		}
		onlyFirst := func(j *store.Job) bool { return j.Seq == 1 }
		all := listAll(t, st, store.ListQuery{Match: onlyFirst, Scan: 4, Limit: 10})
		if w := want(jobs, onlyFirst); !slices.Equal(all, w) {
			t.Fatalf("scan-capped pages = %v, want %v", all, w)
		}
	})

	t.Run("ByteBudgetEndsAPageEarlyWithAResumableCursor", func(t *testing.T) {
		st, jobs := setup(t)
		none := func(*store.Job) bool { return false }
		got, next := list(t, st, store.ListQuery{Match: none, ScanBytes: 1})
		if len(got) != 0 || next != jobs[len(jobs)-1].Seq {
			t.Fatalf("byte-capped list = %v next %d, want nothing and the cursor past the newest job only", got, next)
		}
		onlyFirst := func(j *store.Job) bool { return j.Seq == 1 }
		all := listAll(t, st, store.ListQuery{Match: onlyFirst, ScanBytes: 1, Limit: 10})
		if w := want(jobs, onlyFirst); !slices.Equal(all, w) {
			t.Fatalf("byte-capped pages = %v, want %v", all, w)
		}
	})

	t.Run("EmptyStoreListsNothing", func(t *testing.T) {
		st := newTestStore(t)
		for _, s := range append([]store.Status{""}, store.Statuses...) {
			got, next := list(t, st, store.ListQuery{Status: s, Limit: 2})
			if len(got) != 0 || next != 0 {
				t.Errorf("status %q: list = %v next %d, want nothing", s, got, next)
			}
		}
	})
}

func TestStoreRecords(t *testing.T) {
	t.Run("WorkersAreKeptInIDOrder", func(t *testing.T) {
		st := newTestStore(t)
		update(t, st, func(tx *store.Tx) error {
			for _, id := range []string{"w2", "w1", "w3"} {
				if err := tx.PutWorker(&store.Worker{ID: id, Slots: 2}, 7); err != nil {
					return err
				}
			}
			return nil
		})
		err := st.View(func(tx *store.Tx) error {
			var got []string
			err := tx.ForEachWorker(func(w *store.Worker) error {
				got = append(got, w.ID)
				if w.ModifyIndex != 7 || w.Slots != 2 {
					t.Errorf("worker %s = mod %d slots %d, want 7 2", w.ID, w.ModifyIndex, w.Slots)
				}
				return nil
			})
			if w := []string{"w1", "w2", "w3"}; !slices.Equal(got, w) {
				t.Errorf("workers = %v, want %v", got, w)
			}
			if _, err := tx.Worker("nope"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("unknown worker: err %v, want ErrNotFound", err)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NodesArePutAndDeleted", func(t *testing.T) {
		st := newTestStore(t)
		update(t, st, func(tx *store.Tx) error {
			for _, id := range []string{"n2", "n1"} {
				if err := tx.PutNode(&store.Node{ID: id, HTTP: id + ":80", Raft: id + ":90"}); err != nil {
					return err
				}
			}
			return tx.DeleteNode("n2")
		})
		err := st.View(func(tx *store.Tx) error {
			nodes, err := tx.Nodes()
			if len(nodes) != 1 || *nodes[0] != (store.Node{ID: "n1", HTTP: "n1:80", Raft: "n1:90"}) {
				t.Errorf("nodes = %+v, want only n1", nodes)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("QueuesPauseAndResume", func(t *testing.T) {
		st := newTestStore(t)
		update(t, st, func(tx *store.Tx) error {
			return errors.Join(tx.SetQueuePaused("b", true), tx.SetQueuePaused("a", true), tx.SetQueuePaused("c", true), tx.SetQueuePaused("c", false))
		})
		err := st.View(func(tx *store.Tx) error {
			if got, w := tx.PausedQueues(), []string{"a", "b"}; !slices.Equal(got, w) {
				t.Errorf("paused = %v, want %v", got, w)
			}
			if !tx.QueuePaused("a") || tx.QueuePaused("c") {
				t.Errorf("QueuePaused a %v c %v, want true false", tx.QueuePaused("a"), tx.QueuePaused("c"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("AppliedAndLastNowSurviveReopen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		st, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		update(t, st, func(tx *store.Tx) error {
			return errors.Join(tx.SetApplied(42), tx.SetLastNow(1_700_000_000_000_000_000))
		})
		insertJobs(t, st, 2)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		st = nil
		st2, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer st2.Close()
		if st2.Path() != path {
			t.Errorf("Path = %q, want %q", st2.Path(), path)
		}
		err = st2.View(func(tx *store.Tx) error {
			if tx.Applied() != 42 || tx.LastNow() != 1_700_000_000_000_000_000 {
				t.Errorf("applied %d last now %d, want 42 and 1.7e18", tx.Applied(), tx.LastNow())
			}
			if !tx.HasJob("job-2") {
				t.Error("job-2 lost on reopen")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		update(t, st2, func(tx *store.Tx) error {
			n, err := tx.NextSeq()
			if n != 3 {
				t.Errorf("NextSeq after reopen = %d, want 3", n)
			}
			return err
		})
	})
}

func TestStoreSnapshot(t *testing.T) {
	t.Run("RestoreRoundTripsSnapshotBytes", func(t *testing.T) {
		src := newTestStore(t)
		insertJobs(t, src, 10, store.StatusPending, store.StatusDone)
		update(t, src, func(tx *store.Tx) error {
			return errors.Join(tx.SetApplied(99), tx.PutWorker(&store.Worker{ID: "w1"}, 3),
				tx.SetQueuePaused("q", true), tx.PutIdempotencyKey("k", "job-1", 0))
		})
		data := snapshotBytes(t, src)

		dst := newTestStore(t)
		insertJobs(t, dst, 3, store.StatusFailed) // state the restore must replace
		if err := dst.Restore(bytes.NewReader(data)); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if digest(t, dst) != digest(t, src) {
			t.Fatal("restored store's digest differs from the source's")
		}
		checked := newTestStore(t)
		if err := checked.RestoreChecked(bytes.NewReader(data)); err != nil {
			t.Fatalf("restore of a checked stream: %v", err)
		}
		if digest(t, checked) != digest(t, src) {
			t.Fatal("the store restored from a checked stream differs from the source")
		}
		got, _ := list(t, dst, store.ListQuery{Status: store.StatusDone})
		if w := []string{"job-10", "job-8", "job-6", "job-4", "job-2"}; !slices.Equal(got, w) {
			t.Fatalf("restored done jobs = %v, want %v", got, w)
		}
		// The restored store takes writes.
		insertJobs(t, dst, 1)
		if digest(t, dst) == digest(t, src) {
			t.Fatal("digest did not change after a write to the restored store")
		}
	})

	t.Run("SnapshotIsConsistentWhileWritesGoOn", func(t *testing.T) {
		st := newTestStore(t)
		insertJobs(t, st, 3)
		want := digest(t, st)
		sn, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		insertJobs(t, st, 2) // must not block on the open snapshot
		var buf bytes.Buffer
		_, err = sn.WriteTo(&buf)
		sn.Close()
		if err != nil {
			t.Fatal(err)
		}
		dst := newTestStore(t)
		if err := dst.Restore(&buf); err != nil {
			t.Fatal(err)
		}
		if digest(t, dst) != want {
			t.Fatal("snapshot taken before writes restored to a different state")
		}
	})

	// Raft may hold a snapshot (a read transaction) of the state while it
	// waits for the goroutine that restores another snapshot into it: a
	// Restore that waited for the open snapshot would wait forever.
	t.Run("RestoreWhileASnapshotIsOpen", func(t *testing.T) {
		st := newTestStore(t)
		insertJobs(t, st, 4)
		before := digest(t, st)
		sn, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		src := newTestStore(t)
		insertJobs(t, src, 9, store.StatusDone)
		data := snapshotBytes(t, src)
		restored := make(chan error, 1)
		go func() { restored <- st.Restore(bytes.NewReader(data)) }()
		select {
		case err := <-restored:
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
		case <-time.After(30 * time.Second):
			sn.Close() // lets the blocked Restore end, so the test can report
			t.Fatal("Restore did not return while a snapshot was open")
		}
		if digest(t, st) != digest(t, src) {
			t.Fatal("the store does not hold the restored state")
		}
		// The open snapshot still reads the state it was taken of.
		var buf bytes.Buffer
		if _, err := sn.WriteTo(&buf); err != nil {
			t.Fatalf("snapshot after restore: %v", err)
		}
		sn.Close()
		sn.Close() // twice is safe
		old := newTestStore(t)
		if err := old.Restore(&buf); err != nil {
			t.Fatal(err)
		}
		if digest(t, old) != before {
			t.Fatal("the snapshot taken before the restore changed")
		}
		insertJobs(t, st, 1) // the restored store takes writes
	})

	t.Run("RestoreOfGarbageFailsAndKeepsOldState", func(t *testing.T) {
		src := newTestStore(t)
		insertJobs(t, src, 50)
		good := snapshotBytes(t, src)
		noise := make([]byte, 64<<10)
		rand.New(rand.NewSource(1)).Read(noise)
		// A valid header with a wrong checksum, as a bit flip would leave.
		flipped := append([]byte(nil), good...)
		for i := 16; i < 32; i++ {
			flipped[i] ^= 0xFF
			flipped[4096+i] ^= 0xFF
		}
		cases := []struct {
			name string
			data []byte
		}{
			{"Empty", nil},
			{"OneByte", []byte{1}},
			{"Text", []byte("this is not a bolt file")},
			{"RandomPages", noise},
			{"CorruptMetaPages", flipped},
			{"Truncated", good[:len(good)/2]},
		}
		// RestoreChecked trusts its stream's checksum for the pages past
		// the few opening reads, but still refuses what is not a whole
		// bolt file: a stream that checked itself can still be one.
		restores := map[string]func(*store.Store, io.Reader) error{
			"Restore":        (*store.Store).Restore,
			"RestoreChecked": (*store.Store).RestoreChecked,
		}
		for name, restore := range restores {
			for _, c := range cases {
				t.Run(name+"/"+c.name, func(t *testing.T) {
					st := newTestStore(t)
					insertJobs(t, st, 4, store.StatusRunning)
					before := digest(t, st)
					if err := restore(st, bytes.NewReader(c.data)); err == nil {
						t.Fatal("restore of garbage succeeded")
					}
					if digest(t, st) != before {
						t.Fatal("a failed restore changed the state")
					}
					insertJobs(t, st, 1) // still writable
					got, _ := list(t, st, store.ListQuery{Limit: 1})
					if w := []string{"job-5"}; !slices.Equal(got, w) {
						t.Fatalf("newest job after failed restore = %v, want %v", got, w)
					}
				})
			}
		}
	})

	t.Run("DigestEqualForEqualContents", func(t *testing.T) {
		a, b := newTestStore(t), newTestStore(t)
		if digest(t, a) != digest(t, b) {
			t.Fatal("two empty stores have different digests")
		}
		insertJobs(t, a, 5, store.StatusPending, store.StatusRunning)
		// b reaches the same contents by another path: one job at a time,
		// with a detour through another status.
		for i := 0; i < 5; i++ {
			j := insertJobs(t, b, 1, store.StatusBlocked)[0]
			update(t, b, func(tx *store.Tx) error {
				j.Status = []store.Status{store.StatusPending, store.StatusRunning}[i%2]
				return tx.UpdateJob(j, store.StatusBlocked, j.Seq)
			})
		}
		if digest(t, a) != digest(t, b) {
			t.Fatal("equal contents, different digests")
		}
	})

	t.Run("DigestChangesWithAnyChange", func(t *testing.T) {
		st := newTestStore(t)
		jobs := insertJobs(t, st, 2)
		changes := []struct {
			name string
			fn   func(tx *store.Tx) error
		}{
			{"JobField", func(tx *store.Tx) error { jobs[0].Output = "x"; return tx.UpdateJob(jobs[0], jobs[0].Status, 1) }},
			{"AppliedIndex", func(tx *store.Tx) error { return tx.SetApplied(5) }},
			{"Worker", func(tx *store.Tx) error { return tx.PutWorker(&store.Worker{ID: "w"}, 1) }},
			{"Node", func(tx *store.Tx) error { return tx.PutNode(&store.Node{ID: "n"}) }},
			{"PausedQueue", func(tx *store.Tx) error { return tx.SetQueuePaused("q", true) }},
			{"IdempotencyKey", func(tx *store.Tx) error { return tx.PutIdempotencyKey("k", "job-1", 0) }},
			{"IdempotencyKeyEnd", func(tx *store.Tx) error { return tx.PutIdempotencyKey("k", "job-1", 5) }},
			{"Expiry", func(tx *store.Tx) error {
				return errors.Join(tx.SetExpiry(jobs[0], 77), tx.UpdateJob(jobs[0], jobs[0].Status, 1))
			}},
			{"DeletedJob", func(tx *store.Tx) error { return tx.DeleteJob(jobs[1]) }},
		}
		seen := map[string]string{digest(t, st): "start"}
		for _, c := range changes {
			update(t, st, c.fn)
			d := digest(t, st)
			if prev, ok := seen[d]; ok {
				t.Errorf("after %s the digest equals the one after %s", c.name, prev)
			}
			seen[d] = c.name
		}
	})
}

func TestOpen(t *testing.T) {
	t.Run("FailsOnAFileThatIsNotAStateFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, []byte("not a bolt file, not at all, no"), 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(path, store.Options{})
		if err == nil {
			st.Close()
			t.Fatal("opened a text file as a state file")
		}
	})
}
