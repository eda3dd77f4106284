package store

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// CountByStatus gives, for every query of indexed terms, the counts by
// status a scan of every record gives, and how many of a set of seqs are
// pending jobs it selects.
func TestCountByStatus(t *testing.T) {
	for seed := range uint64(4) {
		st := openInternal(t)
		w := &searchWorld{r: rand.New(rand.NewPCG(seed, 11))}
		for range 250 {
			mutate(t, st, w)
		}
		var all []*Job
		err := st.View(func(tx *Tx) error {
			return tx.ForEachJob("", func(j *Job) error { all = append(all, j); return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		indexed := 0
		for i := range 200 {
			q := w.query()
			q.Match = nil
			if w.r.IntN(4) == 0 {
				q.Before = uint64(w.r.IntN(40 << epochBits))
			}
			var among []uint64
			for _, j := range all {
				if w.r.IntN(3) == 0 {
					among = append(among, j.Seq)
				}
			}
			slices.Sort(among)
			want, wantAmong := map[Status]int{}, 0
			for _, j := range all {
				if j.Seq > q.After && (q.Before == 0 || j.Seq < q.Before) && selects(q, j) {
					want[j.Status]++
					if j.Status == StatusPending && slices.Contains(among, j.Seq) {
						wantAmong++
					}
				}
			}
			var got StatusCounts
			err := st.View(func(tx *Tx) error {
				var err error
				got, err = tx.CountByStatus(q, among)
				return err
			})
			if errors.Is(err, ErrNotIndexed) {
				if slices.ContainsFunc(q.Terms, func(term IndexTerm) bool {
					return term.Value == "" && term.Field != FieldQueue && term.Field != FieldMetadata
				}) {
					continue
				}
				t.Fatalf("seed %d query %d %+v: %v", seed, i, q, err)
			}
			if err != nil {
				t.Fatalf("seed %d query %d %+v: %v", seed, i, q, err)
			}
			indexed++
			if !maps.Equal(got.ByStatus, want) || got.Among != wantAmong {
				t.Fatalf("seed %d query %d %+v: counted %v (%d among), want %v (%d)", seed, i, q, got.ByStatus, got.Among, want, wantAmong)
			}
		}
		if indexed < 50 {
			t.Fatalf("seed %d: only %d queries counted from the index", seed, indexed)
		}
	}
	t.Run("AMatchIsNotIndexed", func(t *testing.T) {
		st := openInternal(t)
		err := st.View(func(tx *Tx) error {
			_, err := tx.CountByStatus(ListQuery{Match: func(*Job) bool { return true }}, nil)
			return err
		})
		if !errors.Is(err, ErrNotIndexed) {
			t.Fatalf("err = %v, want ErrNotIndexed", err)
		}
	})
}
