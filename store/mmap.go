package store

import (
	"math"
	"os"
)

// The state file's mapping.
//
// bbolt reads the file through one read-only mapping. When a commit needs
// pages past its end, bbolt maps the file again (DB.mmap), and that waits
// for every open read transaction to end: each holds the mapping's lock
// for reading as long as it lives, and the remap takes it for writing.
// Read transactions begun meanwhile wait behind the remap. A snapshot, and
// the transfer of one to a joining node, holds a read transaction for as
// long as it streams the file (13 s at 1M jobs, about 150 s at 10M), so a
// remap during one stalled every apply on the node (on the leader, every
// commit's reply) and every read, until the stream ended. Past 1 GiB bbolt
// grows the mapping 1 GiB at a time, so a state file above 1 GiB (about
// 1.4M jobs) remapped at every GiB it grew.
//
// So on 64-bit machines the file is mapped at least minMmapLen, and at
// least four times its size when opened: address space, not memory (the
// kernel backs only the pages read, and a read-only shared mapping of a
// file is not counted against overcommit). A remap then happens only
// once the file has grown fourfold since the node started, or past
// minMmapLen. On 32-bit machines, where bbolt maps at most 2 GiB, the
// mapping starts at 1 GiB as before.

// minMmapLen is the least mapping on 64-bit machines. A var so that tests
// can lower it.
var minMmapLen int64 = 64 << 30

// mmapLen is how much of the file at path to map when opening it.
func mmapLen(path string) int {
	if math.MaxInt == math.MaxInt32 {
		return defaultMmapLen
	}
	n := minMmapLen
	if fi, err := os.Stat(path); err == nil {
		const gib = 1 << 30
		n = max(n, (4*fi.Size()+gib-1)/gib*gib)
	}
	return int(n)
}
