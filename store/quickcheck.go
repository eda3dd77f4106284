package store

import (
	"fmt"
	"hash/fnv"
	"os"
)

// QuickCheck checks, in a few reads, the pages of the state file at path
// that opening it reads before anything else: the meta pages (one must be
// whole: bbolt's magic, version and checksum), the freelist page, and the
// root bucket's own pages (the tree naming every bucket), as VerifyPages
// checks them. A start that leaves the full check to the background runs
// it first, so that a file damaged throughout (a disk's doing) is checked
// in full and set aside rather than crash bbolt at its first reads; damage
// elsewhere is the background check's to find. Errors wrap ErrDamaged as
// Verify's do.
func QuickCheck(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("quick check: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("quick check: %w", err)
	}
	if fi.Size() < minFileSize {
		return fmt.Errorf("%w: %d bytes is too short for a state file", ErrDamaged, fi.Size())
	}
	var m meta
	ok := false
	for page := range int64(2) {
		// bbolt's smallest page is 1 KiB, and the second meta page is at
		// its page size: read each candidate's first.
		var cand meta
		buf := make([]byte, pageHeaderSize+metaLen)
		at := int64(0)
		if page == 1 {
			if !ok {
				at = 4096 // the usual page size, when the first meta is unreadable
			} else {
				at = int64(m.pageSize)
			}
		}
		if _, err := f.ReadAt(buf, at); err != nil {
			continue
		}
		if cand.parse(buf[pageHeaderSize:]) && (!ok || cand.txid > m.txid) {
			m, ok = cand, true
		}
	}
	if !ok {
		return fmt.Errorf("%w: neither meta page is whole", ErrDamaged)
	}
	if need := int64(m.pgid) * int64(m.pageSize); fi.Size() < need {
		return fmt.Errorf("%w: truncated: %d of its %d bytes", ErrDamaged, fi.Size(), need)
	}
	w := &pageWalker{f: newChunkReader(f), pageSize: int(m.pageSize), high: m.pgid, seen: make([]uint64, (m.pgid+63)/64), top: true}
	if err := w.tree(m.root); err != nil {
		return fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	return nil
}

// meta is what QuickCheck reads of a bbolt meta page (see metaFreelistAt).
type meta struct {
	pageSize       uint32
	root, freelist uint64
	pgid, txid     uint64
}

// metaLen is the bytes of a meta after its page header, checksum included.
const metaLen = 64

const (
	boltMagic   = 0xED0CDAED
	boltVersion = 2
)

// parse reads b, the meta after its page header, and says whether it is
// whole: bbolt's magic and version, and its checksum (FNV-64a of the
// 56 bytes before it).
func (m *meta) parse(b []byte) bool {
	if len(b) < metaLen || le.Uint32(b) != boltMagic || le.Uint32(b[4:]) != boltVersion {
		return false
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:56])
	if h.Sum64() != le.Uint64(b[56:]) {
		return false
	}
	m.pageSize = le.Uint32(b[8:])
	m.root = le.Uint64(b[16:])
	m.freelist = le.Uint64(b[32:])
	m.pgid = le.Uint64(b[40:])
	m.txid = le.Uint64(b[48:])
	return m.pageSize >= 1024 && m.pageSize <= 1<<16 && m.pgid > 2
}
