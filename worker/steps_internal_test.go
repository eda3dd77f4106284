package worker

import (
	"errors"
	"strconv"
	"testing"
)

// An attempt counts at most MaxStepNames step names: a new one past it is
// refused with ErrTooManyStepNames (before any request), while names it
// already counts go on to their next occurrence.
func TestStepNamesAreBounded(t *testing.T) {
	j := &journal{jobID: "j1", lease: 1, seen: map[string]int{}, recorded: map[string]string{}, complete: true}
	for i := range MaxStepNames {
		if _, _, err := j.next("s" + strconv.Itoa(i)); err != nil {
			t.Fatalf("name %d: %v", i, err)
		}
	}
	if _, _, err := j.next("one-too-many"); !errors.Is(err, ErrTooManyStepNames) {
		t.Fatalf("a new name past the bound: %v, want ErrTooManyStepNames", err)
	}
	if key, _, err := j.next("s0"); err != nil || key != "s0#2" {
		t.Fatalf("a counted name: %q, %v; want s0#2", key, err)
	}
	if len(j.seen) != MaxStepNames {
		t.Fatalf("%d names counted, want %d", len(j.seen), MaxStepNames)
	}
}
