package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// walkPages reads the page tree of every bucket from root (the root
// bucket's root page) in the file itself, without bbolt, and refuses a tree
// that bbolt could not walk safely: a page id past the high-water mark, a
// page of the wrong type, an element that points outside its page, or a
// page reached twice (a cycle, on which bbolt's cursor descends forever,
// growing its stack until the process runs out of memory). Only a file
// that passes is handed to bbolt's cursors and consistency check.
//
// It checks one page (with its overflow) at a time, reading the file in
// chunks (chunkReader), so it costs the file's size in reads, a bit per
// page and a few chunks in memory. Pages are in the byte order
// of the machine that wrote them; bbolt runs little-endian here (amd64,
// arm64), as every supported platform of Workron is.
//
// freelist, unless noFreelist, is the page of bbolt's list of free pages as
// of the same transaction (see metaFreelist): each id it lists must be a
// page below the high-water mark that no tree reaches and that it lists
// once, or bbolt would hand out a page in use.
func walkPages(f io.ReaderAt, pageSize int, highWater uint64, root, freelist uint64, stop <-chan struct{}) error {
	w := &pageWalker{f: newChunkReader(f), pageSize: pageSize, high: highWater, seen: make([]uint64, (highWater+63)/64), stop: stopper{stop: stop}}
	if err := w.tree(root); err != nil {
		return err
	}
	if freelist == noFreelist {
		return nil
	}
	return w.freelist(freelist)
}

// noFreelist is the freelist page id of a file whose free pages bbolt did
// not write (Options.NoFreelistSync): it finds them by walking every page.
const noFreelist = ^uint64(0)

// freelistPage is the flag of bbolt's freelist page.
const freelistPage = 0x10

// freelist checks the freelist page id, after tree has marked every page
// in use.
func (w *pageWalker) freelist(id uint64) error {
	p, err := w.read(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if flags := le.Uint16(p[8:]); flags != freelistPage {
		return fmt.Errorf("freelist page %d: type %#x", id, flags)
	}
	at, n := uint64(pageHeaderSize), uint64(le.Uint16(p[10:]))
	if n == 0xFFFF { // more than a u16 holds: the count is the first id
		n, at = le.Uint64(p[pageHeaderSize:]), at+8
	}
	if n > uint64(len(p)) || at+8*n > uint64(len(p)) {
		return fmt.Errorf("freelist page %d: %d ids do not fit it", id, n)
	}
	for i := range n {
		free := le.Uint64(p[at+8*i:])
		if free < 2 || free >= w.high {
			return fmt.Errorf("freelist page %d: page id %d outside the pages in use (2 to %d)", id, free, w.high-1)
		}
		if w.mark(free) {
			return fmt.Errorf("freelist page %d: page %d is free and in use, or listed twice", id, free)
		}
	}
	return nil
}

// Layout of bbolt's meta page (go.etcd.io/bbolt/internal/common/meta.go),
// after the page header: magic u32, version u32, page size u32, flags u32,
// root bucket (root u64, sequence u64), freelist u64, high-water u64,
// txid u64, checksum u64.
const (
	metaFreelistAt = pageHeaderSize + 32
	metaTxidAt     = pageHeaderSize + 48
)

// metaFreelist reads the freelist page id of transaction txid from the
// meta page that holds it (bbolt writes the two in turn), false if neither
// does (the file has moved on since).
func metaFreelist(f io.ReaderAt, pageSize int, txid uint64) (uint64, bool) {
	m := make([]byte, metaTxidAt+8)
	for page := range int64(2) {
		if _, err := f.ReadAt(m, page*int64(pageSize)); err != nil {
			continue
		}
		if le.Uint64(m[metaTxidAt:]) == txid {
			return le.Uint64(m[metaFreelistAt:]), true
		}
	}
	return 0, false
}

// Layout of bbolt's pages (go.etcd.io/bbolt/internal/common/page.go).
const (
	pageHeaderSize  = 16 // id u64, flags u16, count u16, overflow u32
	pageElementSize = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketHeader    = 16 // a bucket value: root pgid u64, sequence u64
	branchPage      = 0x01
	leafPage        = 0x02
	bucketLeaf      = 0x01 // a leaf element that is a bucket
	// maxPageOverflow bounds the overflow pages of one page that the walk
	// reads: a value larger than this many pages is damage for Workron.
	maxPageOverflow = 1 << 16
)

var le = binary.LittleEndian

type pageWalker struct {
	f        io.ReaderAt
	pageSize int
	high     uint64   // pages in use: ids from high on are past the end
	seen     []uint64 // a bit per page id below high: read already
	stop     stopper
	top      bool // walk the root bucket's own pages only (QuickCheck)
}

// mark records page id as read and says whether it had been already.
func (w *pageWalker) mark(id uint64) (again bool) {
	bit := uint64(1) << (id % 64)
	again = w.seen[id/64]&bit != 0
	w.seen[id/64] |= bit
	return again
}

// pageRef is a page to read: its id and how deep its bucket is nested.
type pageRef struct {
	id    uint64
	depth int
}

// tree walks the pages of every bucket from the root bucket's root page id,
// a level at a time: each level's page ids are read in ascending order, so
// the file is read forward in chunks (chunkReader) rather than a page at a
// time in tree order. Every page is read and checked once, as a walk in
// tree order would; only the order, and so which of two faults is reported,
// differs.
func (w *pageWalker) tree(root uint64) error {
	level := []pageRef{{id: root}}
	for len(level) > 0 {
		slices.SortFunc(level, func(a, b pageRef) int { return cmp.Compare(a.id, b.id) })
		var next []pageRef
		for _, r := range level {
			if w.stop.stopped() {
				return ErrCheckStopped
			}
			p, err := w.read(r.id)
			if err != nil {
				return err
			}
			switch flags := le.Uint16(p[8:]); flags {
			case branchPage:
				kids, err := branchChildren(p)
				if err != nil {
					return fmt.Errorf("page %d: %w", r.id, err)
				}
				for _, k := range kids {
					next = append(next, pageRef{id: k, depth: r.depth})
				}
			case leafPage:
				if err := w.leaf(p, r.depth, &next); err != nil {
					return fmt.Errorf("page %d: %w", r.id, err)
				}
			default:
				return fmt.Errorf("page %d: type %#x where a branch or leaf page belongs", r.id, flags)
			}
		}
		level = next
	}
	return nil
}

// read reads page id with its overflow pages, once: a page reached again
// is refused.
func (w *pageWalker) read(id uint64) ([]byte, error) {
	if id < 2 || id >= w.high {
		return nil, fmt.Errorf("page id %d outside the pages in use (2 to %d)", id, w.high-1)
	}
	if w.mark(id) {
		return nil, fmt.Errorf("page %d reached twice (a cycle or a shared page)", id)
	}
	head := make([]byte, w.pageSize)
	if _, err := w.f.ReadAt(head, int64(id)*int64(w.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := le.Uint64(head); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	over := uint64(le.Uint32(head[12:]))
	if over == 0 {
		return head, nil
	}
	if over > maxPageOverflow || id+over >= w.high {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the pages in use", id, over)
	}
	for i := id + 1; i <= id+over; i++ {
		if w.mark(i) {
			return nil, fmt.Errorf("page %d reached twice (overflow of page %d)", i, id)
		}
	}
	p := make([]byte, int(over+1)*w.pageSize)
	copy(p, head)
	if _, err := w.f.ReadAt(p[w.pageSize:], int64(id+1)*int64(w.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d overflow: %w", id, err)
	}
	return p, nil
}

// branchChildren lists a branch page's child page ids.
func branchChildren(p []byte) ([]uint64, error) {
	n := int(le.Uint16(p[10:]))
	if n == 0 || pageHeaderSize+n*pageElementSize > len(p) {
		return nil, fmt.Errorf("%d branch elements do not fit the page", n)
	}
	kids := make([]uint64, n)
	for i := range kids {
		e := pageHeaderSize + i*pageElementSize
		pos, ksize := int(le.Uint32(p[e:])), int(le.Uint32(p[e+4:]))
		if e+pos+ksize > len(p) || pos < 0 || ksize < 0 {
			return nil, fmt.Errorf("branch element %d points outside the page", i)
		}
		kids[i] = le.Uint64(p[e+8:])
	}
	return kids, nil
}

// leaf checks a leaf page's elements and the inline buckets it holds, and
// adds the root pages of the other buckets it holds to next.
func (w *pageWalker) leaf(p []byte, depth int, next *[]pageRef) error {
	n := int(le.Uint16(p[10:]))
	if pageHeaderSize+n*pageElementSize > len(p) {
		return fmt.Errorf("%d leaf elements do not fit the page", n)
	}
	for i := range n {
		e := pageHeaderSize + i*pageElementSize
		flags := le.Uint32(p[e:])
		pos, ksize, vsize := uint64(le.Uint32(p[e+4:])), uint64(le.Uint32(p[e+8:])), uint64(le.Uint32(p[e+12:]))
		end := uint64(e) + pos + ksize + vsize
		if end > uint64(len(p)) {
			return fmt.Errorf("leaf element %d points outside the page", i)
		}
		if flags&bucketLeaf == 0 {
			continue
		}
		v := p[uint64(e)+pos+ksize : end]
		if len(v) < bucketHeader {
			return fmt.Errorf("leaf element %d: a bucket of %d bytes", i, len(v))
		}
		if w.top {
			continue // a bucket of its own: not read
		}
		if root := le.Uint64(v); root != 0 {
			if depth+1 > maxBucketDepth {
				return errors.New("buckets nested too deep")
			}
			*next = append(*next, pageRef{id: root, depth: depth + 1})
			continue
		}
		// An inline bucket: its one leaf page is in the value.
		inline := v[bucketHeader:]
		if len(inline) < pageHeaderSize || le.Uint16(inline[8:]) != leafPage {
			return fmt.Errorf("leaf element %d: an inline bucket without its leaf page", i)
		}
		if depth+1 > maxBucketDepth {
			return errors.New("buckets nested too deep")
		}
		if err := w.leaf(inline, depth+1, next); err != nil {
			return fmt.Errorf("inline bucket: %w", err)
		}
	}
	return nil
}
