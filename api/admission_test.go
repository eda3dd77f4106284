package api

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

func TestUnschedulableReason(t *testing.T) {
	w := func(id string, vram, mem int, tags ...string) *store.Worker {
		return &store.Worker{ID: id, VRAMMB: vram, MemoryMB: mem, Tags: tags}
	}
	workers := []*store.Worker{w("a", 24576, 65536, "gpu"), w("b", 16384, 131072, "gpu", "a100"), w("c", 0, 8192)}
	cases := []struct {
		name string
		need store.Resources
		tags []string
		n    int
		want string
	}{
		{"TooMuchVRAM", store.Resources{VRAMMB: 40960}, nil, 1, "needs 40960 MB VRAM; largest worker has 24576"},
		{"TooMuchMemory", store.Resources{MemoryMB: 200000}, nil, 1, "needs 200000 MB memory; largest worker has 131072"},
		{"NoSuchTag", store.Resources{}, []string{"tpu"}, 1, "needs tags tpu; no active worker has them all"},
		{"NoWorkerHasAllOfIt", store.Resources{VRAMMB: 20000}, []string{"a100"}, 1, "needs 20000 MB VRAM, tags a100; no active worker has all of it"},
		{"GangTooWide", store.Resources{VRAMMB: 8000}, []string{"gpu"}, 3, "gang of 3 needs 3 workers with 8000 MB VRAM, tags gpu; 2 active workers have it"},
		{"Fits", store.Resources{VRAMMB: 8000}, []string{"gpu"}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := unschedulableReason(c.need, c.tags, c.n, workers); got != c.want {
				t.Errorf("reason = %q, want %q", got, c.want)
			}
		})
	}
	if got := unschedulableReason(store.Resources{VRAMMB: 1}, nil, 1, nil); got != "needs 1 MB VRAM; no worker is active" {
		t.Errorf("with no worker: %q", got)
	}
}
