package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/workron/workron/store"
)

func TestQueueLimitsAndTokenBuckets(t *testing.T) {
	st := newTestStore(t)
	type bucket struct {
		queue string
		isKey bool
		key   string
		tb    store.TokenBucket
	}
	list := func() []bucket {
		var out []bucket
		err := st.View(func(tx *store.Tx) error {
			return tx.ForEachTokenBucket(func(q string, isKey bool, key string, tb store.TokenBucket) error {
				out = append(out, bucket{q, isKey, key, tb})
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	l := store.QueueLimits{Concurrency: 2, KeyRate: store.Rate{Count: 5, Per: 1e9}}
	err := st.Update(func(tx *store.Tx) error {
		if err := tx.PutQueueLimits("a", &l, 7); err != nil {
			return err
		}
		for _, b := range []bucket{{"a", false, "", store.TokenBucket{Level: 1, At: 2}}, {"a", true, "x\x00y", store.TokenBucket{Level: -3, At: 4}},
			{"a", true, "", store.TokenBucket{Level: 5, At: 6}}, {"ab", true, "x", store.TokenBucket{Level: 7, At: 8}}} {
			if err := tx.PutTokenBucket(b.queue, b.isKey, b.key, b.tb); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// In key order: a queue's key buckets ('k'), then its own ('q'); a key
	// may hold any byte.
	if got := fmt.Sprint(list()); got != fmt.Sprint([]bucket{{"a", true, "", store.TokenBucket{Level: 5, At: 6}},
		{"a", true, "x\x00y", store.TokenBucket{Level: -3, At: 4}}, {"a", false, "", store.TokenBucket{Level: 1, At: 2}}, {"ab", true, "x", store.TokenBucket{Level: 7, At: 8}}}) {
		t.Fatalf("buckets %q", got)
	}
	err = st.Update(func(tx *store.Tx) error {
		got, err := tx.QueueLimits("a")
		if err != nil || got.Concurrency != 2 || got.KeyRate != l.KeyRate || got.ModifyIndex != 7 {
			return fmt.Errorf("limits %+v, %v", got, err)
		}
		// Queue a's key buckets go, its own and ab's stay.
		if err := tx.DeleteTokenBuckets("a", true); err != nil {
			return err
		}
		// Zero limits delete the record.
		return tx.PutQueueLimits("a", &store.QueueLimits{}, 8)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 2 || got[0].queue != "a" || got[0].isKey || got[1].queue != "ab" {
		t.Fatalf("after deleting a's key buckets: %q", fmt.Sprint(got))
	}
	err = st.View(func(tx *store.Tx) error {
		_, err := tx.QueueLimits("a")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("limits after zeroing: %v, want ErrNotFound", err)
	}
}
