package store_test

import (
	"fmt"
	"testing"

	"github.com/workron/workron/store"
)

func TestFlowState(t *testing.T) {
	st := newTestStore(t)
	list := func() string {
		var out []string
		err := st.View(func(tx *store.Tx) error {
			return tx.ForEachFlowState(func(q string, r store.Rotation) error {
				out = append(out, fmt.Sprintf("rot %q %+v", q, r))
				return nil
			}, func(q string, isKey bool, key string, p store.Pause) error {
				out = append(out, fmt.Sprintf("pause %q %v %q %+v", q, isKey, key, p))
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(out)
	}
	err := st.Update(func(tx *store.Tx) error {
		for _, e := range []error{
			tx.PutRotation("a", store.Rotation{Key: "x\x00y", Used: 2}),
			tx.PutRotation("a", store.Rotation{Key: "z", Used: 3}), // replaces
			tx.PutPause("a", true, "k\x00", store.Pause{Until: 5, Reason: "429"}),
			tx.PutPause("a", false, "", store.Pause{Until: 6}),
			tx.PutPause("ab", true, "", store.Pause{Until: 7}),
		} {
			if e != nil {
				return e
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// In key order; a key may hold any byte.
	want := fmt.Sprint([]string{`pause "a" true "k\x00" {Until:5 Reason:429}`, `pause "a" false "" {Until:6 Reason:}`,
		`rot "a" {Key:z Used:3}`, `pause "ab" true "" {Until:7 Reason:}`})
	if got := list(); got != want {
		t.Fatalf("flow state\n%s\nwant\n%s", got, want)
	}
	err = st.Update(func(tx *store.Tx) error { return tx.DeletePause("a", true, "k\x00") })
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprint([]string{`pause "a" false "" {Until:6 Reason:}`, `rot "a" {Key:z Used:3}`, `pause "ab" true "" {Until:7 Reason:}`})
	if got := list(); got != want {
		t.Fatalf("after a delete\n%s\nwant\n%s", got, want)
	}
}
