package store

// The search index's shared lists (index.go): the terms of one job in
// their epoch, kept together under their group's key.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"sort"
)

// sharedEntry is one term of a shared list (the part after its group's
// prefix) and its one job's low.
type sharedEntry struct {
	term []byte
	low  uint64
}

// partLen is the length of the key part b starts with, -1 if b starts
// with none.
func partLen(b []byte) int {
	n := -1
	switch {
	case len(b) == 0:
	case b[0] == hashedPart:
		n = 1 + sha256.Size
	case b[0] <= maxIndexedBytes:
		n = 1 + int(b[0])
	}
	if n > len(b) {
		return -1
	}
	return n
}

// groupLen is the length of the prefix the list key k shares with the
// terms of its shared list: kind and epoch and, for the kinds of two
// parts (status and queue, metadata key and value), the first part. -1
// for a malformed key.
func groupLen(k []byte) int {
	if len(k) < 1+epochLen {
		return -1
	}
	if k[0] != idxStatusQueue && k[0] != idxMetadata {
		return 1 + epochLen
	}
	n := partLen(k[1+epochLen:])
	if n < 0 {
		return -1
	}
	return 1 + epochLen + n
}

// isSharedKey reports whether k is the key of a shared list.
func isSharedKey(k []byte) bool {
	n := groupLen(k)
	return n > 0 && len(k) == n+1 && k[n] == idxShared
}

// sharedList is the value of a shared key (index.go): the terms of its
// group that have one job in the epoch, sorted by the part after the
// group's prefix, each with its job's low, so that a binary search finds
// a term:
//
//	count(2) offset(4)*count entry*count   entry: low(2) part
//
// offsets from the start of the value. A malformed value reads as empty
// or with empty entries (Check reports it).
type sharedList []byte

func (s sharedList) n() int {
	if len(s) < 2 {
		return 0
	}
	n := int(s[0])<<8 | int(s[1])
	if len(s) < 2+4*n {
		return 0
	}
	return n
}

// entry is entry i of s, i < s.n(); a zero entry if it is malformed.
func (s sharedList) entry(i int) sharedEntry {
	o := int(binary.BigEndian.Uint32(s[2+4*i:]))
	if o < 0 || o+2 > len(s) {
		return sharedEntry{}
	}
	l := partLen(s[o+2:])
	if l < 0 {
		return sharedEntry{}
	}
	return sharedEntry{term: s[o+2 : o+2+l], low: uint64(s[o])<<8 | uint64(s[o+1])}
}

// find is the posting list (one low) of term, the part after the group's
// prefix, in s; nil if s has none.
func (s sharedList) find(term []byte) []byte {
	n := s.n()
	i := sort.Search(n, func(i int) bool { return bytes.Compare(s.entry(i).term, term) >= 0 })
	if i == n || !bytes.Equal(s.entry(i).term, term) {
		return nil
	}
	o := int(binary.BigEndian.Uint32(s[2+4*i:]))
	return s[o : o+2]
}

// sharedBuilder builds a shared list entry by entry, in term order, in
// buffers without pointers (a flush adds thousands of entries, which the
// garbage collector need not look at), kept grown for the next list.
type sharedBuilder struct {
	body []byte   // the entries, one after another
	offs []uint32 // where each starts in body
}

func (sb *sharedBuilder) reset() { sb.body, sb.offs = sb.body[:0], sb.offs[:0] }

// add adds the entry of term, the part after the group's prefix, and low.
func (sb *sharedBuilder) add(low uint64, term []byte) {
	// One append per statement: the compiler then stores back only the
	// length unless the slice grew, with no write barrier while the
	// collector runs (a nested append stores the whole header).
	sb.offs = append(sb.offs, uint32(len(sb.body)))
	sb.body = append(sb.body, byte(low>>8), byte(low))
	sb.body = append(sb.body, term...)
}

// size is the length of the shared list.
func (sb *sharedBuilder) size() int {
	if len(sb.offs) == 0 {
		return 0
	}
	return 2 + 4*len(sb.offs) + len(sb.body)
}

// appendTo appends the shared list to b; nothing for none.
func (sb *sharedBuilder) appendTo(b []byte) []byte {
	n := len(sb.offs)
	if n == 0 {
		return b
	}
	at := len(b)
	b = append(b, byte(n>>8), byte(n))
	for _, o := range sb.offs {
		b = binary.BigEndian.AppendUint32(b, uint32(2+4*n)+o)
	}
	return append(b, sb.body...)[at:]
}

// appendShared appends the shared list of ents (sorted by term) to b;
// nothing for none.
func appendShared(b []byte, ents []sharedEntry) []byte {
	var sb sharedBuilder
	for _, e := range ents {
		sb.add(e.low, e.term)
	}
	return sb.appendTo(b)
}

// applyPostings applies ops in order to the sorted list v, in place.
func applyPostings(v []byte, ops []pendingOp) []byte {
	for _, o := range ops {
		op := o.op
		low := op &^ dropLow
		n := len(v) / 2
		if op&dropLow == 0 && (n == 0 || postingLow(v, n-1) < uint64(low)) {
			v = append(v, byte(low>>8), byte(low)) // a new job: the usual case
			continue
		}
		i := sort.Search(n, func(i int) bool { return postingLow(v, i) >= uint64(low) })
		has := i < n && postingLow(v, i) == uint64(low)
		switch {
		case op&dropLow != 0 && has:
			v = append(v[:2*i], v[2*i+2:]...)
		case op&dropLow == 0 && !has:
			v = append(v, 0, 0)
			copy(v[2*i+2:], v[2*i:])
			v[2*i], v[2*i+1] = byte(low>>8), byte(low)
		}
	}
	return v
}
