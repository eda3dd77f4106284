package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// liveHeads is what the heads bucket should hold, read from the records:
// the head of every live job, by seq.
func liveHeads(t *testing.T, tx *Tx) map[uint64]JobHead {
	t.Helper()
	want := map[uint64]JobHead{}
	err := tx.ForEachJob("", func(j *Job) error {
		if j.Status.Live() {
			want[j.Seq] = j.Head()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// checkHeads compares the heads bucket with the live records twice: read
// back through ForEachLiveHead, field by field, and by Check's byte
// comparison.
func checkHeads(t *testing.T, st *Store, when string) {
	t.Helper()
	err := st.View(func(tx *Tx) error {
		want := liveHeads(t, tx)
		got := map[uint64]JobHead{}
		err := tx.ForEachLiveHead(func(h *JobHead) error {
			c := *h
			if len(c.Tags) == 0 {
				c.Tags = nil
			}
			got[h.Seq] = c
			return nil
		})
		if err != nil {
			return err
		}
		for seq, h := range want {
			if len(h.Tags) == 0 {
				h.Tags = nil
				want[seq] = h
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: heads bucket holds\n%+v\nthe live records' heads are\n%+v", when, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("%s: check: %v", when, err)
	}
}

// TestHeadsBucketFollowsTheRecords: through random inserts, status
// changes (each status to each), lease renewals, reports that change no
// head field and deletes, a few a transaction, the heads bucket holds the
// head of every live job and nothing else.
func TestHeadsBucketFollowsTheRecords(t *testing.T) {
	st := openInternal(t)
	r := rand.New(rand.NewPCG(1, 2))
	var ids []string
	index := uint64(1)
	for step := range 300 {
		err := st.Update(func(tx *Tx) error {
			for range 1 + r.IntN(4) {
				index++
				switch op := r.IntN(10); {
				case op < 3 || len(ids) == 0:
					seq, err := tx.NextSeq()
					if err != nil {
						return err
					}
					j := &Job{ID: fmt.Sprintf("job-%d", seq), Seq: seq, Queue: []string{"a", "b"}[r.IntN(2)],
						Status: Statuses[r.IntN(len(Statuses))], Priority: r.IntN(3), RunAt: int64(r.IntN(100))}
					if r.IntN(3) == 0 {
						j.ConcurrencyKey, j.Tags = "k", []string{"gpu"}
					}
					if err := tx.InsertJob(j, index); err != nil {
						return err
					}
					ids = append(ids, j.ID)
				case op < 8:
					j, err := tx.Job(ids[r.IntN(len(ids))])
					if err != nil {
						return err
					}
					prev := j.Status
					switch r.IntN(3) {
					case 0:
						j.Status = Statuses[r.IntN(len(Statuses))]
						j.WorkerID, j.Lease = "w", index
					case 1:
						j.LeaseDeadline = int64(index) // a heartbeat
					default:
						j.Output += "x" // no head field
					}
					if err := tx.UpdateJob(j, prev, index); err != nil {
						return err
					}
				default:
					i := r.IntN(len(ids))
					j, err := tx.Job(ids[i])
					if err != nil {
						return err
					}
					if err := tx.DeleteJob(j); err != nil {
						return err
					}
					ids = append(ids[:i], ids[i+1:]...)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if step%10 == 0 {
			checkHeads(t, st, fmt.Sprintf("step %d", step))
		}
	}
	checkHeads(t, st, "the end")
}

// TestCheckFindsAWrongHead: a head missing, one left of a job no longer
// live, one that is not its record's: Check names each.
func TestCheckFindsAWrongHead(t *testing.T) {
	harm := map[string]func(tx *Tx) error{
		"missing":   func(tx *Tx) error { return tx.tx.Bucket(bucketHeads).Delete(putUint(1)) },
		"left over": func(tx *Tx) error { return tx.tx.Bucket(bucketHeads).Put(putUint(2), []byte{jobRecordV1}) },
		"stale": func(tx *Tx) error {
			v := bytes.Clone(tx.tx.Bucket(bucketHeads).Get(putUint(1)))
			v[len(v)-2]++ // the last resource field
			return tx.tx.Bucket(bucketHeads).Put(putUint(1), v)
		},
	}
	for name, fn := range harm {
		t.Run(name, func(t *testing.T) {
			st := openInternal(t)
			err := st.Update(func(tx *Tx) error {
				if err := tx.InsertJob(&Job{ID: "a", Seq: 1, Status: StatusPending}, 1); err != nil {
					return err
				}
				return tx.InsertJob(&Job{ID: "b", Seq: 2, Status: StatusDone}, 1)
			})
			if err != nil {
				t.Fatal(err)
			}
			checkHeads(t, st, "before")
			if err := st.Update(fn); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(); err == nil {
				t.Error("Check passed a heads bucket that is not the live records'")
			}
		})
	}
}

// olderRelease makes st's file what a release before the heads bucket
// leaves: no bucket, no keyHeadsApplied.
func olderRelease(tx *Tx) error {
	if err := tx.tx.DeleteBucket(bucketHeads); err != nil {
		return err
	}
	return tx.tx.Bucket(bucketMeta).Delete(keyHeadsApplied)
}

// TestHeadsBucketIsBuiltOnOpen: a file of a release before the bucket, one
// whose build a crash cut short (a head missing, a stale one, no
// keyHeadsApplied), one an older release applied an entry to since (a job
// finished, its head left), and one that lost the bucket get it built on
// Open, in batches, as a store that kept it from the start holds it (same
// digest).
func TestHeadsBucketIsBuiltOnOpen(t *testing.T) {
	fill := func(t *testing.T) *Store {
		st := openInternal(t)
		insertTestJobs(t, st)
		err := st.Update(func(tx *Tx) error {
			for i := range 200 {
				j := &Job{ID: fmt.Sprintf("x%03d", i), Seq: uint64(100 + i), Status: Statuses[i%len(Statuses)], Queue: "q"}
				if err := tx.InsertJob(j, 5); err != nil {
					return err
				}
			}
			return tx.SetApplied(5)
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cases := map[string]func(tx *Tx) error{
		"an older release's": olderRelease,
		"a build cut short": func(tx *Tx) error {
			if err := tx.tx.Bucket(bucketHeads).Delete(putUint(101)); err != nil {
				return err
			}
			if err := tx.tx.Bucket(bucketHeads).Put(putUint(105), []byte{jobRecordV1, 9}); err != nil {
				return err
			}
			return tx.tx.Bucket(bucketMeta).Delete(keyHeadsApplied)
		},
		"applied to by an older release": func(tx *Tx) error {
			// As an older release finishes job x001 (pending): its record
			// rewritten, its status index entry moved, its head left.
			j, err := tx.Job("x001")
			if err != nil {
				return err
			}
			j.Status = StatusDone
			v, err := appendJob(nil, j)
			if err != nil {
				return err
			}
			if err := tx.tx.Bucket(bucketJobs).Put([]byte(j.ID), v); err != nil {
				return err
			}
			if err := tx.tx.Bucket(bucketStatus).Delete(statusKey(StatusPending, j.Seq)); err != nil {
				return err
			}
			if err := tx.tx.Bucket(bucketStatus).Put(statusKey(StatusDone, j.Seq), []byte(j.ID)); err != nil {
				return err
			}
			return tx.putMetaUint(keyApplied, 6)
		},
		"that lost the bucket": func(tx *Tx) error { return tx.tx.DeleteBucket(bucketHeads) },
	}
	for name, harm := range cases {
		t.Run(name, func(t *testing.T) {
			st := fill(t)
			want := storeDigest(t, st)
			if err := st.Update(harm); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(); (err == nil) != (name != "that lost the bucket") {
				t.Errorf("Check before Open: %v; want an error only for a current file without its bucket", err)
			}
			err := st.View(func(tx *Tx) error {
				if headsCurrent(tx.tx.Bucket(bucketMeta)) && name != "that lost the bucket" {
					t.Error("heads taken for current")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			st = reopen(t, st)
			checkHeads(t, st, "after Open")
			err = st.View(func(tx *Tx) error {
				if !headsCurrent(tx.tx.Bucket(bucketMeta)) {
					t.Error("after Open: heads not current")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if name != "applied to by an older release" && storeDigest(t, st) != want {
				t.Error("digest after the build differs from the store's before")
			}
		})
	}
	t.Run("in batches", func(t *testing.T) {
		st := fill(t)
		want := storeDigest(t, st)
		if err := st.Update(cases["a build cut short"]); err != nil {
			t.Fatal(err)
		}
		if err := st.buildHeads(7); err != nil {
			t.Fatal(err)
		}
		checkHeads(t, st, "after a build of 7 a batch")
		if storeDigest(t, st) != want {
			t.Error("digest after the build differs")
		}
	})
}

// TestRestoredSnapshotHasItsHeads: a snapshot an older release took (no
// heads bucket) restored has the live jobs' heads built, and one this
// release took holds them as taken.
func TestRestoredSnapshotHasItsHeads(t *testing.T) {
	for _, older := range []bool{true, false} {
		t.Run(fmt.Sprint("older ", older), func(t *testing.T) {
			old := openInternal(t)
			insertTestJobs(t, old)
			if older {
				if err := old.Update(olderRelease); err != nil {
					t.Fatal(err)
				}
			}
			buf := snapshotBuffer(t, old)
			backup := filepath.Join(t.TempDir(), "backup.db")
			if err := os.WriteFile(backup, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(backup); err != nil {
				t.Fatalf("verify the snapshot: %v", err)
			}
			st := openInternal(t)
			if err := st.Restore(buf); err != nil {
				t.Fatalf("restore: %v", err)
			}
			checkHeads(t, st, "after the restore")
			err := st.View(func(tx *Tx) error {
				n := 0
				err := tx.ForEachLiveHead(func(*JobHead) error { n++; return nil })
				if n != 2 {
					t.Errorf("%d live heads, want 2 (job-7 pending, the full job running)", n)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
