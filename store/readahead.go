package store

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"
)

// Reading ahead the pages a start's rebuild reads (docs/DESIGN.md, "A
// start"). bbolt reads the file through its mapping, which it advises
// MADV_RANDOM: each page it touches that is not in the page cache is a
// fault and a read of that one page, and the leaves of a bucket in key
// order lie at random offsets of the file. At 10,000,000 jobs the records
// of the live jobs sit on about half the jobs bucket's leaves: read so,
// 14 s to 103 s on a cold cache. A start now reads their heads from the
// heads bucket (heads.go), about 20,000 leaves, but those too lie at
// random offsets. ReadAheadStart finds them, and the search index's
// counts', from the branch pages and asks the kernel for them in
// ascending file offset (posix_fadvise WILLNEED), runs of near pages
// joined, before bbolt reads them. Then, cached or not, it maps the same
// pages into bbolt's mapping (populate, MADV_POPULATE_READ), so that
// bbolt's first touch of each is not a fault of its own. It only warms the page cache and the page tables: what it
// reads means nothing to the store, bbolt remains the one reader of the
// records, and a failure of it costs only the time it would have saved.

// ReadAhead says what a read-ahead asked of the kernel.
type ReadAhead struct {
	Cached   bool  // every page of a sample of the file was in the page cache: nothing advised
	Branches int   // branch pages read to find the leaves
	Leaves   int   // leaf pages holding at least one of the keys
	Runs     int   // runs of pages asked for, near leaves joined
	Bytes    int64 // bytes asked for
	Mapped   int64 // bytes of the leaves and branch pages mapped into bbolt's mapping (populate)
	MapErr   error // why no more were: the kernel refused (before Linux 5.14), or a page lay outside
}

// readAheadGap is the most pages between two leaves asked for in one run:
// reading a few pages more in order is cheaper than another request.
const readAheadGap = 8

// readAheadRun bounds the bytes of one request to the kernel.
const readAheadRun = 8 << 20

// cacheSamples is how many pages of the file a read-ahead looks for in
// the page cache first: if all are there, so most likely are the leaves,
// and it skips the branch pages' reads. A file a tenth of which is out
// passes with a chance of 0.9^1024, none.
const cacheSamples = 1024

// ReadAheadStart asks the kernel to read into the page cache the leaf
// pages a start's rebuild reads next: the heads bucket's (heads.go), all
// of them, and the search index's status×queue lists (JobCounts). It reads
// the branch pages that lead to them itself (a level at a time, in
// ascending file offset, each level asked ahead first) through its own
// descriptor of the file, checking each as the page check does; the leaves
// it does not read. When a sample of the file's pages is all in the page
// cache it advises nothing (Cached). Then it maps the leaves and the
// branch pages into bbolt's mapping (populate), which returns when they
// are read. Its memory is 8 bytes a page found. An error (a damaged or
// short file, another file at the path) says only that the warm-up
// stopped: the heads are still read through bbolt, which is what decides
// whether they are whole.
func (t *Tx) ReadAheadStart() (ReadAhead, error) {
	heads := keyTree{root: uint64(t.tx.Bucket(bucketHeads).Root()), keys: [][]byte{{}}, ends: [][]byte{bytes.Repeat([]byte{0xff}, 9)}}
	counts := keyTree{root: uint64(t.tx.Bucket(bucketIndex).Root()), keys: [][]byte{{idxStatusQueue}}, ends: [][]byte{{idxStatusQueue + 1}}}
	return t.readAhead(heads, counts)
}

// keyTree is a bucket's B+tree (its root page) and the keys to find in
// it, ascending: keys[i] alone, or when ends is set the keys from keys[i]
// up to ends[i] (excluded), the ranges apart.
type keyTree struct {
	root       uint64
	keys, ends [][]byte
}

// readAhead finds the leaves of trees that hold their keys
// (leavesHolding), advises them unless the file is cached, and maps them
// and the branch pages read into bbolt's mapping (populate). The mapping
// is the one t reads through: bbolt remaps only under its mmap lock held
// for writing, which waits for every read transaction to end (t holds it
// for reading while it lives), so its address and the size of t's pages
// in it stand until t ends.
func (t *Tx) readAhead(trees ...keyTree) (ReadAhead, error) {
	db := t.tx.DB()
	f, err := os.Open(db.Path())
	if err != nil {
		return ReadAhead{}, fmt.Errorf("read ahead: %w", err)
	}
	defer f.Close()
	info := db.Info()
	ra, pages, err := readAheadLeaves(f, info.PageSize, uint64(t.tx.Size())/uint64(info.PageSize), trees,
		cached(f, t.tx.Size(), cacheSamples))
	if err != nil {
		return ra, fmt.Errorf("read ahead: %w", err)
	}
	ra.Mapped, ra.MapErr = populate(mapping{addr: info.Data, size: t.tx.Size()}, info.PageSize, pageRuns(info.PageSize, pages), populateSys)
	return ra, nil
}

// populateSys maps pages of a mapping in (madvisePopulate); tests replace it.
var populateSys = madvisePopulate

// readAheadLeaves finds the leaves of trees that hold their keys
// (leavesHolding) and, unless cached, advises them, in one ascending list.
// It returns too the pages to map ahead: those leaves and the branch pages
// read to find them, ascending.
func readAheadLeaves(f *os.File, pageSize int, high uint64, trees []keyTree, cached bool) (ReadAhead, []uint64, error) {
	ra := ReadAhead{Cached: cached}
	if fi, err := f.Stat(); err != nil {
		return ra, nil, err
	} else if fi.Size() < int64(high)*int64(pageSize) {
		return ra, nil, fmt.Errorf("a file of %d bytes holds %d pages of %d bytes", fi.Size(), high, pageSize)
	}
	w := &pageWalker{f: f, pageSize: pageSize, high: high, seen: make([]uint64, (high+63)/64)}
	ahead := func(ids []uint64) error {
		if cached {
			return nil
		}
		_, _, err := advise(f, pageSize, pageRuns(pageSize, ids))
		return err
	}
	var leaves, branches []uint64
	for _, tr := range trees {
		if tr.root == 0 || len(tr.keys) == 0 {
			continue // an inline bucket: no page of its own
		}
		found, err := leavesHolding(w, tr, ahead, &branches)
		if err != nil {
			return ra, nil, err
		}
		leaves = append(leaves, found...)
	}
	slices.Sort(leaves)
	ra.Leaves, ra.Branches = len(leaves), len(branches)
	if !cached {
		var err error
		if ra.Runs, ra.Bytes, err = advise(f, pageSize, pageRuns(pageSize, leaves)); err != nil {
			return ra, nil, err
		}
	}
	pages := append(leaves, branches...)
	slices.Sort(pages)
	return ra, pages, nil
}

// keySpan is a page of the tree and the keys, keys[lo:hi], within its
// range.
type keySpan struct {
	id     uint64
	lo, hi int
}

// leavesHolding returns, in ascending order, the ids of the leaf pages of
// tr that hold one of its keys (or a key of one of its ranges), as
// bbolt's Seek finds them. It descends a level at a time: each level's
// page ids sorted, handed to ahead, then read through w (the first alone
// when it may be a leaf: bbolt's leaves are all at one depth, so a level
// whose first page is a leaf is all leaves, and those are not read). A
// branch page's children whose key range holds no key are left out.
// branches gets the ids of the branch pages read.
func leavesHolding(w *pageWalker, tr keyTree, ahead func(ids []uint64) error, branches *[]uint64) ([]uint64, error) {
	level := []keySpan{{id: tr.root, hi: len(tr.keys)}}
	var leaves []uint64
	for len(level) > 0 {
		slices.SortFunc(level, func(a, b keySpan) int { return cmp.Compare(a.id, b.id) })
		ids := make([]uint64, len(level))
		for i, s := range level {
			ids[i] = s.id
		}
		p, err := w.read(ids[0])
		if err != nil {
			return nil, err
		}
		if le.Uint16(p[8:]) == leafPage {
			leaves = append(leaves, ids...)
			break
		}
		if err := ahead(ids[1:]); err != nil {
			return nil, err
		}
		var next []keySpan
		for i, s := range level {
			if i > 0 {
				if p, err = w.read(s.id); err != nil {
					return nil, err
				}
			}
			switch flags := le.Uint16(p[8:]); flags {
			case branchPage:
				*branches = append(*branches, s.id)
				if err := splitKeys(p, tr, s.lo, s.hi, &next); err != nil {
					return nil, fmt.Errorf("page %d: %w", s.id, err)
				}
			case leafPage: // a leaf above the bottom level: read already
				leaves = append(leaves, s.id)
			default:
				return nil, fmt.Errorf("page %d: type %#x where a branch or leaf page belongs", s.id, flags)
			}
		}
		level = next
	}
	slices.Sort(leaves)
	return leaves, nil
}

// splitKeys adds to next each child of branch page p whose key range holds
// some of tr's keys[lo:hi] (or meets their ranges): child i holds the keys
// from its element's key to the next element's, the first child also
// those below (bbolt's searchPage), the last those above. A range that
// runs past a child's end goes to the next child too.
func splitKeys(p []byte, tr keyTree, lo, hi int, next *[]keySpan) error {
	n := int(le.Uint16(p[10:]))
	if n == 0 || pageHeaderSize+n*pageElementSize > len(p) {
		return fmt.Errorf("%d branch elements do not fit the page", n)
	}
	for i, j := 0, lo; i < n && j < hi; i++ {
		end, j2 := hi, hi
		if i+1 < n {
			bound, err := branchKey(p, i+1)
			if err != nil {
				return err
			}
			for end = j; end < hi && bytes.Compare(tr.keys[end], bound) < 0; end++ {
			}
			j2 = end
			if tr.ends != nil && end > j && bytes.Compare(tr.ends[end-1], bound) > 0 {
				j2 = end - 1 // the last range goes on into the next child
			}
		}
		if end > j {
			*next = append(*next, keySpan{id: le.Uint64(p[pageHeaderSize+i*pageElementSize+8:]), lo: j, hi: end})
		}
		j = j2
	}
	return nil
}

// branchKey is the key of element i of branch page p.
func branchKey(p []byte, i int) ([]byte, error) {
	e := pageHeaderSize + i*pageElementSize
	pos, ksize := int(le.Uint32(p[e:])), int(le.Uint32(p[e+4:]))
	if pos < 0 || ksize < 0 || e+pos+ksize > len(p) {
		return nil, fmt.Errorf("branch element %d points outside the page", i)
	}
	return p[e+pos : e+pos+ksize], nil
}

// pageRun is a run of pages of the file: n pages from page first.
type pageRun struct{ first, n uint64 }

// pageRuns joins ids (ascending) into runs of near pages, at most
// readAheadGap apart and readAheadRun bytes long: the pages between two
// ids of a run are read too.
func pageRuns(pageSize int, ids []uint64) []pageRun {
	var runs []pageRun
	for i := 0; i < len(ids); {
		first, last := ids[i], ids[i]
		for i++; i < len(ids) && ids[i]-last <= readAheadGap && int64(ids[i]-first+1)*int64(pageSize) <= readAheadRun; i++ {
			last = ids[i]
		}
		runs = append(runs, pageRun{first: first, n: last - first + 1})
	}
	return runs
}

// advise asks the kernel to read runs of pages of f into the page cache
// (posix_fadvise WILLNEED), and returns the runs and bytes asked for.
func advise(f *os.File, pageSize int, runs []pageRun) (int, int64, error) {
	ps, n := int64(pageSize), int64(0)
	for i, r := range runs {
		off, size := int64(r.first)*ps, int64(r.n)*ps
		if err := willNeed(f, off, size); err != nil {
			return i, n, fmt.Errorf("advise %d bytes at %d: %w", size, off, err)
		}
		n += size
	}
	return len(runs), n, nil
}

// mapping is bbolt's mapping of the file as a read transaction sees it:
// the address of its first byte, and the bytes from there that hold the
// transaction's pages (tx.Size(): bbolt maps at least the file, and the
// file holds at least those).
type mapping struct {
	addr uintptr
	size int64
}

// populate has the kernel map runs of pages into m (sys, madvisePopulate:
// MADV_POPULATE_READ), reading those not in the page cache, so that
// bbolt's reads of them after do not fault a page at a time (bbolt
// advises its mapping MADV_RANDOM: each first touch of a page is a fault
// of that page alone). It returns the bytes mapped, and why it stopped
// before the end: a run not wholly within m.size (a damaged page id: none
// is asked for), or sys's error (EINVAL before Linux 5.14). Either only
// leaves the rest to fault in as before.
func populate(m mapping, pageSize int, runs []pageRun, sys func(addr, n uintptr) error) (int64, error) {
	var done int64
	ps, pages := uint64(pageSize), uint64(max(m.size, 0))/uint64(pageSize)
	for _, r := range runs {
		if r.n == 0 || r.first >= pages || r.n > pages-r.first {
			return done, fmt.Errorf("map ahead: pages %d to %d outside the %d pages mapped", r.first, r.first+r.n-1, pages)
		}
		off, end := r.first*ps, (r.first+r.n)*ps
		start := off &^ uint64(osPageSize-1) // madvise's address is aligned to the system's page
		if err := sys(m.addr+uintptr(start), uintptr(end-start)); err != nil {
			return done, fmt.Errorf("map ahead %d bytes at %d: %w", end-off, off, err)
		}
		done += int64(end - off)
	}
	return done, nil
}
