package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// indexEntries is the search index's bucket, one "key=value" (hex) an
// entry, in key order.
func indexEntries(t *testing.T, st *Store) []string {
	t.Helper()
	var out []string
	err := st.View(func(tx *Tx) error {
		return tx.tx.Bucket(bucketIndex).ForEach(func(k, v []byte) error {
			out = append(out, fmt.Sprintf("%x=%x", k, v))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// batchJob is searchWorld's job with what makes an index's lists hard to
// keep in a batch: a value of its own under a long key (a term whose first
// 16 bytes past its group's prefix every other job's shares), and a value
// that differs from another only by zero bytes at its end.
func (w *searchWorld) batchJob(seq uint64) *Job {
	j := w.job(seq)
	if j.Metadata == nil {
		j.Metadata = map[string]string{}
	}
	if w.r.IntN(4) != 0 {
		j.Metadata["request"] = fmt.Sprintf("request-%030d", seq)
	}
	if w.r.IntN(2) == 0 {
		j.Metadata["zeros"] = "ab" + strings.Repeat("\x00", w.r.IntN(3))
	}
	return j
}

// TestSearchIndexKeptInBatches: the index kept through many random
// transactions of many changes each (a job inserted, changed and deleted
// in one of them, reads in between that write what was noted so far,
// transactions rolled back) holds, byte for byte, what a build from the
// job records does.
func TestSearchIndexKeptInBatches(t *testing.T) {
	refused := errors.New("refused")
	for seed := range uint64(4) {
		st := openInternal(t)
		w := &searchWorld{r: rand.New(rand.NewPCG(seed, 11))}
		var ids []string
		for range 80 {
			changes, fail := 1+w.r.IntN(60), w.r.IntN(8) == 0
			kept := slices.Clone(ids)
			err := st.Update(func(tx *Tx) error {
				for range changes {
					if err := change(tx, w, &kept, w.batchJob); err != nil {
						return err
					}
					if w.r.IntN(12) == 0 {
						q := ListQuery{Terms: []IndexTerm{{Field: FieldMetadata, Key: "zeros", Value: "ab"}}, Limit: 1}
						if _, _, err := tx.ListJobs(q); err != nil {
							return err
						}
					}
				}
				if fail {
					return refused
				}
				return nil
			})
			switch {
			case fail && !errors.Is(err, refused):
				t.Fatalf("seed %d: a failing update: %v", seed, err)
			case !fail && err != nil:
				t.Fatalf("seed %d: %v", seed, err)
			case !fail:
				ids = kept
			}
		}
		if err := st.Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		kept := indexEntries(t, st)
		if len(kept) < 100 {
			t.Fatalf("seed %d: an index of %d entries, too few to say much", seed, len(kept))
		}
		toPreviousRelease(t, st)
		st = reopen(t, st)
		if built := indexEntries(t, st); !slices.Equal(kept, built) {
			for i := range min(len(kept), len(built)) {
				if kept[i] != built[i] {
					t.Fatalf("seed %d: entry %d kept %s, built %s", seed, i, kept[i], built[i])
				}
			}
			t.Fatalf("seed %d: %d entries kept, %d built", seed, len(kept), len(built))
		}
	}
}
