package store

import (
	"errors"
	"slices"
	"syscall"
	"testing"
)

// TestPopulateAsksOnlyForPagesWithinTheMapping: each run becomes one
// request of exactly its bytes (the first and the last page of the
// mapping included); a run that reaches past the transaction's pages, or
// starts past them, or is empty, is refused before the kernel is asked,
// and what came before it stands.
func TestPopulateAsksOnlyForPagesWithinTheMapping(t *testing.T) {
	const ps, pages = 4096, 100
	m := mapping{addr: 1 << 30, size: pages * ps}
	type req struct{ addr, n uintptr }
	var got []req
	record := func(addr, n uintptr) error { got = append(got, req{addr, n}); return nil }

	runs := []pageRun{{first: 0, n: 1}, {first: 2, n: 3}, {first: 99, n: 1}}
	n, err := populate(m, ps, runs, record)
	want := []req{{m.addr, ps}, {m.addr + 2*ps, 3 * ps}, {m.addr + 99*ps, ps}}
	if err != nil || n != 5*ps || !slices.Equal(got, want) {
		t.Errorf("populate(%v) = %d, %v asking %v; want %d bytes asking %v", runs, n, err, got, 5*ps, want)
	}
	for _, r := range []pageRun{{first: 99, n: 2}, {first: 100, n: 1}, {first: 3, n: 0}, {first: 1 << 62, n: 1}, {first: 1, n: 1<<64 - 1}} {
		got = nil
		n, err := populate(m, ps, []pageRun{{first: 5, n: 1}, r}, record)
		if err == nil || n != ps || len(got) != 1 {
			t.Errorf("populate of run %+v after a good one = %d, %v asking %v; want the run refused, the good one asked", r, n, err, got)
		}
		for _, q := range got {
			if q.addr < m.addr || q.addr+q.n > m.addr+uintptr(m.size) {
				t.Errorf("run %+v: asked for %d bytes at %#x, outside the mapping", r, q.n, q.addr)
			}
		}
	}
}

// TestPopulateStopsWhenTheKernelRefuses: the kernel's error (EINVAL
// before Linux 5.14) is returned with the bytes mapped before it, and no
// more is asked.
func TestPopulateStopsWhenTheKernelRefuses(t *testing.T) {
	calls := 0
	refuse := func(uintptr, uintptr) error {
		if calls++; calls == 2 {
			return syscall.EINVAL
		}
		return nil
	}
	n, err := populate(mapping{addr: 1 << 30, size: 100 * 4096}, 4096, []pageRun{{2, 1}, {4, 2}, {8, 1}}, refuse)
	if !errors.Is(err, syscall.EINVAL) || n != 4096 || calls != 2 {
		t.Errorf("populate with the kernel refusing the second run = %d, %v after %d calls; want 4096 bytes, EINVAL, 2 calls", n, err, calls)
	}
}

// TestReadAheadMapsThePagesItFinds: readAheadJobs asks the kernel to map
// the leaves it found and the branch pages it read, each within bbolt's
// mapping of the transaction's pages; when the kernel refuses, it says so
// in MapErr and the read-ahead itself stands (no error, leaves found),
// and the jobs read as before.
func TestReadAheadMapsThePagesItFinds(t *testing.T) {
	s := readAheadStore(t, 3000, func(i int) bool { return i%5 == 0 })
	defer func(sys func(uintptr, uintptr) error) { populateSys = sys }(populateSys)
	err := s.View(func(tx *Tx) error {
		keys := pendingKeys(tx)
		info := s.db.Info()
		base, end := info.Data, info.Data+uintptr(tx.tx.Size())
		var asked int64
		populateSys = func(addr, n uintptr) error {
			if addr < base || addr+n > end || addr%uintptr(osPageSize) != 0 {
				t.Errorf("asked to map %d bytes at %#x: outside bbolt's mapping of the pages, %#x to %#x", n, addr, base, end)
			}
			asked += int64(n)
			return madvisePopulate(addr, n)
		}
		ra, err := tx.readAheadJobs(keys)
		if err != nil || ra.MapErr != nil || ra.Leaves == 0 || ra.Mapped < int64((ra.Leaves+ra.Branches)*info.PageSize) || ra.Mapped != asked {
			t.Errorf("readAheadJobs = %+v, %v, %d bytes asked; want its leaves and branch pages mapped", ra, err, asked)
		}
		populateSys = func(uintptr, uintptr) error { return syscall.EINVAL }
		refused, err := tx.readAheadJobs(keys)
		if err != nil || !errors.Is(refused.MapErr, syscall.EINVAL) || refused.Mapped != 0 || refused.Leaves != ra.Leaves {
			t.Errorf("readAheadJobs with the kernel refusing = %+v, %v; want the %d leaves found, nothing mapped, EINVAL", refused, err, ra.Leaves)
		}
		jobs := 0
		if err := tx.forEachJobHeadIn(keys, func() { jobs++ }); err != nil || jobs != len(keys) {
			t.Errorf("the heads after: %d jobs of %d, %v", jobs, len(keys), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
