package bench

import "testing"

var sink []*[64]byte

// heapAllocs, what a figure's allocs is the difference of, counts every
// heap object the process allocates.
func TestHeapAllocsCounts(t *testing.T) {
	const n = 1000
	before := heapAllocs()
	for range n {
		sink = append(sink, new([64]byte))
	}
	if got := heapAllocs() - before; got < n {
		t.Errorf("heapAllocs rose by %d over %d allocations", got, n)
	}
	sink = nil
}
