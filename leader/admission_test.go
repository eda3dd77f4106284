package leader

import (
	"reflect"
	"testing"

	"github.com/workron/workron/store"
)

func TestPlaceGangs(t *testing.T) {
	gpu := func(id string, vram int, tags ...string) candidate {
		return candidate{id: id, free: store.Resources{VRAMMB: vram, MemoryMB: 1 << 16}, tags: tags}
	}
	gang := func(id string, size, prio int, seq uint64, vram int, tags ...string) store.Gang {
		return store.Gang{ID: id, Size: size, Priority: prio, Seq: seq, Queue: "default", Resources: store.Resources{VRAMMB: vram}, Tags: tags}
	}

	t.Run("LargestFirstThenPriorityThenAge", func(t *testing.T) {
		cands := []candidate{gpu("a", 8000), gpu("b", 8000), gpu("c", 8000), gpu("d", 8000)}
		waiting := []store.Gang{
			gang("old-pair", 2, 0, 1, 8000),
			gang("urgent-pair", 2, 9, 3, 8000),
			gang("trio", 3, 0, 5, 8000),
			gang("single", 1, 0, 2, 8000),
		}
		got := placeGangs(waiting, cands)
		// The trio takes three of four workers; no pair fits in what is
		// left, the single does.
		want := []placement{{gang: "trio", workers: []string{"a", "b", "c"}}, {gang: "single", workers: []string{"d"}}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("placed %+v, want %+v", got, want)
		}
		got = placeGangs(waiting[:2], cands)
		want = []placement{{gang: "urgent-pair", workers: []string{"a", "b"}}, {gang: "old-pair", workers: []string{"c", "d"}}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pairs placed %+v, want the higher priority first: %+v", got, want)
		}
	})

	t.Run("DistinctWorkersThatFitTightestFirst", func(t *testing.T) {
		cands := []candidate{gpu("huge", 80000, "gpu"), gpu("small", 4000, "gpu"), gpu("mid", 16000, "gpu"), gpu("notag", 80000)}
		got := placeGangs([]store.Gang{gang("g", 2, 0, 1, 12000, "gpu")}, cands)
		want := []placement{{gang: "g", workers: []string{"mid", "huge"}}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("placed %+v, want %+v", got, want)
		}
		if got := placeGangs([]store.Gang{gang("g", 3, 0, 1, 12000, "gpu")}, cands); len(got) != 0 {
			t.Fatalf("a gang of 3 placed on 2 fitting workers: %+v", got)
		}
	})

	t.Run("OnePassNeverDoubleBooks", func(t *testing.T) {
		cands := []candidate{gpu("a", 16000), gpu("b", 16000)}
		got := placeGangs([]store.Gang{gang("x", 2, 0, 1, 8000), gang("y", 2, 0, 2, 8000), gang("z", 2, 0, 3, 8000)}, cands)
		if len(got) != 2 || got[0].gang != "x" || got[1].gang != "y" {
			t.Fatalf("placed %+v, want x and y (two 8000 MB tasks per 16000 MB worker), not z", got)
		}
	})

	t.Run("BusySlotsAndOtherQueuesAreSkipped", func(t *testing.T) {
		busy := gpu("busy", 8000)
		busy.slots, busy.busy = 1, 1
		other := gpu("other", 8000)
		other.queues = []string{"batch"}
		got := placeGangs([]store.Gang{gang("g", 1, 0, 1, 0)}, []candidate{busy, other, gpu("free", 8000)})
		if len(got) != 1 || got[0].workers[0] != "free" {
			t.Fatalf("placed %+v, want on free", got)
		}
	})
}
