package api

import (
	"testing"

	"github.com/workron/workron/store"
)

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
		{"GangWiderThanTheActiveWorkers", store.Resources{}, nil, 4, "gang of 4 needs 4 distinct active workers; 3 are active"},
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
