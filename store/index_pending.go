package store

// The search index's changes in a write transaction (index.go): noted
// one by one as jobs change, written at the commit, each list once.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// indexPending gathers a write transaction's changes to the lists: the
// lists changed, each key once (in keys), found by a hash table of their
// keys (slots), and each change in the order made (a low to add to a list
// or, with dropLow, to drop from it). flushIndex puts the lists in key
// order: by group (groupLen; a transaction touches few) and within one by
// two words of the term, integers, the rest of a term's bytes only for a
// term longer than 16 bytes (most keys of a group differ in their first 16
// bytes after its prefix, few in their first 16 from the start).
type indexPending struct {
	seed  maphash.Seed
	keys  []byte
	lists []pendingList
	slots []int32 // 1 + the list's index in lists; 0 for none
	ops   []pendingOp
	// scratch of flushIndex, kept for the next transaction
	groups       map[string]int32 // a group's prefix -> its number, an index in prefixes
	prefixes     []string
	recent       [4]int32 // numbers of the groups last found, the last first
	rank, byRank []int32  // number -> rank of the prefix, and back
	sorted       []sortedList
	byGroup      []sortedList
	order        []pendingOp
	start, fill  []int32
	olds         [][]byte // per list in key order: its own key's value, if any
	shared       sharedBuilder
	sk           []byte
}

// pendingList is a list of indexPending.
type pendingList struct {
	hash uint64 // of its key
	at   uint32 // its key is keys[at : at+n]
	n    uint16
	slot int32 // its place in slots
}

// sortedList is a list of indexPending, as flushIndex sorts them: the
// rank of its group and bytes 0-7 and 8-15 of its term (the key past the
// group's prefix), big-endian, zeros past its end.
type sortedList struct {
	w0, w1 uint64
	grp    int32
	list   int32
}

type pendingOp struct {
	list int32
	op   uint16 // the low, | dropLow to drop it
}

const dropLow = 1 << 15

// The hash table's first size, and bounds of what a transaction's changes
// leave allocated for the next one (an index build notes 10,000 jobs a
// transaction, the apply of an entry of batch submits as many).
const (
	minPendingSlots    = 1 << 10
	maxKeptPendingOps  = 1 << 17
	maxKeptPendingKeys = 4 << 20
)

// reset empties ix for the next transaction, keeping its room up to the
// bounds.
func (ix *indexPending) reset() {
	if ix == nil {
		return
	}
	if len(ix.lists) < len(ix.slots)/16 {
		for _, l := range ix.lists {
			ix.slots[l.slot] = 0
		}
	} else {
		clear(ix.slots)
	}
	clear(ix.groups)
	clear(ix.prefixes)
	ix.keys, ix.lists, ix.ops, ix.prefixes = ix.keys[:0], ix.lists[:0], ix.ops[:0], ix.prefixes[:0]
	if cap(ix.ops) > maxKeptPendingOps || cap(ix.keys) > maxKeptPendingKeys {
		*ix = indexPending{seed: ix.seed}
	}
}

// word is the 8 bytes of k from at, big-endian, zeros past its end.
func word(k []byte, at int) uint64 {
	if at+8 <= len(k) {
		return binary.BigEndian.Uint64(k[at:])
	}
	var w uint64
	for i := range 8 {
		w <<= 8
		if at+i < len(k) {
			w |= uint64(k[at+i])
		}
	}
	return w
}

// pend notes a change to the list at key.
func (t *Tx) pend(key []byte, low uint64, drop bool) {
	if t.ix == nil {
		t.ix = &indexPending{seed: maphash.MakeSeed()}
	}
	ix := t.ix
	if len(ix.slots) < 2*(len(ix.lists)+1) {
		ix.grow()
	}
	h := maphash.Bytes(ix.seed, key)
	mask := uint64(len(ix.slots) - 1)
	slot := h & mask
	for ; ix.slots[slot] != 0; slot = (slot + 1) & mask {
		l := &ix.lists[ix.slots[slot]-1]
		if l.hash == h && bytes.Equal(ix.key(l), key) {
			break
		}
	}
	list := ix.slots[slot] - 1
	if list < 0 {
		list = int32(len(ix.lists))
		ix.lists = append(ix.lists, pendingList{hash: h, at: uint32(len(ix.keys)), n: uint16(len(key)), slot: int32(slot)})
		ix.keys = append(ix.keys, key...)
		ix.slots[slot] = list + 1
	}
	op := uint16(low)
	if drop {
		op |= dropLow
	}
	ix.ops = append(ix.ops, pendingOp{list, op})
}

// grow doubles ix's hash table (makes it, the first time).
func (ix *indexPending) grow() {
	ix.slots = make([]int32, max(2*len(ix.slots), minPendingSlots))
	mask := uint64(len(ix.slots) - 1)
	for i := range ix.lists {
		l := &ix.lists[i]
		slot := l.hash & mask
		for ix.slots[slot] != 0 {
			slot = (slot + 1) & mask
		}
		ix.slots[slot], l.slot = int32(i)+1, int32(slot)
	}
}

// key is l's key.
func (ix *indexPending) key(l *pendingList) []byte {
	return ix.keys[l.at : l.at+uint32(l.n) : l.at+uint32(l.n)]
}

// group is the number of the group of prefix: one of the last few found
// (a job's lists are of a few groups, a batch's jobs of the same ones), or
// from the map of them all.
func (ix *indexPending) group(prefix []byte) int32 {
	for i, g := range ix.recent {
		if g < int32(len(ix.prefixes)) && ix.prefixes[g] == string(prefix) {
			copy(ix.recent[1:i+1], ix.recent[:i])
			ix.recent[0] = g
			return g
		}
	}
	g, ok := ix.groups[string(prefix)]
	if !ok {
		g = int32(len(ix.prefixes))
		p := string(prefix)
		ix.groups[p] = g
		ix.prefixes = append(ix.prefixes, p)
	}
	copy(ix.recent[1:], ix.recent[:len(ix.recent)-1])
	ix.recent[0] = g
	return g
}

// sortLists fills ix.sorted with the lists in key order: by group (no
// group's prefix is a prefix of another's, so the groups' order is their
// keys'), then by term. Each group's lists are sorted apart, from the order
// they were first changed in, which is often theirs already (a batch's
// values of one key counting up).
func (ix *indexPending) sortLists() error {
	if ix.groups == nil {
		ix.groups = map[string]int32{}
	}
	ix.sorted = slices.Grow(ix.sorted[:0], len(ix.lists))[:len(ix.lists)]
	for i := range ix.lists {
		k := ix.key(&ix.lists[i])
		gl := groupLen(k)
		if gl < 0 {
			return fmt.Errorf("write search index: malformed key %q", k)
		}
		ix.sorted[i] = sortedList{w0: word(k, gl), w1: word(k, gl+8), grp: ix.group(k[:gl]), list: int32(i)}
	}
	// The groups in key order, and each list's group by its rank.
	n := len(ix.prefixes)
	ix.byRank = ix.byRank[:0]
	for g := range n {
		ix.byRank = append(ix.byRank, int32(g))
	}
	slices.SortFunc(ix.byRank, func(a, b int32) int { return strings.Compare(ix.prefixes[a], ix.prefixes[b]) })
	ix.rank = slices.Grow(ix.rank[:0], n)[:n]
	for r, g := range ix.byRank {
		ix.rank[g] = int32(r)
	}
	// The lists by group (a counting sort, through byGroup), then each
	// group's by term.
	ix.start = append(ix.start[:0], make([]int32, n+1)...)
	for i := range ix.sorted {
		s := &ix.sorted[i]
		s.grp = ix.rank[s.grp]
		ix.start[s.grp+1]++
	}
	for i := 1; i <= n; i++ {
		ix.start[i] += ix.start[i-1]
	}
	ix.fill = append(ix.fill[:0], ix.start[:n]...)
	ix.byGroup = slices.Grow(ix.byGroup[:0], len(ix.sorted))[:len(ix.sorted)]
	for _, s := range ix.sorted {
		ix.byGroup[ix.fill[s.grp]] = s
		ix.fill[s.grp]++
	}
	ix.sorted, ix.byGroup = ix.byGroup, ix.sorted
	for g := range n {
		skip := len(ix.prefixes[ix.byRank[g]]) + 16
		slices.SortFunc(ix.sorted[ix.start[g]:ix.start[g+1]], func(a, b sortedList) int {
			switch {
			case a.w0 != b.w0:
				return cmp.Compare(a.w0, b.w0)
			case a.w1 != b.w1:
				return cmp.Compare(a.w1, b.w1)
			}
			// The first 16 bytes of the terms are the same, so are
			// their lengths (a term is one part, its length first; a
			// hashed one is longer than 16 bytes): the rest decides.
			ka, kb := ix.key(&ix.lists[a.list]), ix.key(&ix.lists[b.list])
			return bytes.Compare(ka[min(skip, len(ka)):], kb[min(skip, len(kb)):])
		})
	}
	return nil
}

// flushIndex writes the transaction's gathered changes to the lists, in
// key order, each list once. Store.Update calls it before committing, and
// plan before it reads the index. It reads every list it changes first,
// with one cursor and no write in between (bbolt's cursors are not to be
// moved across writes), then writes them group by group (groupLen): a term
// left with one job in its epoch goes into its group's shared list, one
// left with more gets (or keeps) a key of its own (see index.go).
func (t *Tx) flushIndex() error {
	ix := t.ix
	if ix == nil || len(ix.ops) == 0 {
		return nil
	}
	defer ix.reset()
	if err := ix.sortLists(); err != nil {
		return err
	}
	// The ops grouped by list, each list's in order (a counting sort).
	n := len(ix.lists)
	ix.start = append(ix.start[:0], make([]int32, n+1)...)
	start := ix.start
	for _, o := range ix.ops {
		start[o.list+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	ix.order = slices.Grow(ix.order[:0], len(ix.ops))[:len(ix.ops)]
	ix.fill = append(ix.fill[:0], start[:n]...)
	for _, o := range ix.ops {
		ix.order[ix.fill[o.list]] = o
		ix.fill[o.list]++
	}
	b := t.tx.Bucket(bucketIndex)
	// Read: each list's own key, if it has one. The keys are sorted, so a
	// seek that lands past the next key shows it absent without another.
	ix.olds = slices.Grow(ix.olds[:0], n)[:n]
	c := b.Cursor()
	var ck, cv []byte
	sought := false
	for p, sl := range ix.sorted {
		k := ix.key(&ix.lists[sl.list])
		if !sought || (ck != nil && bytes.Compare(ck, k) < 0) {
			ck, cv = c.Seek(k)
			sought = true
		}
		ix.olds[p] = nil
		if ck != nil && bytes.Equal(ck, k) {
			ix.olds[p] = cv
		}
	}
	// Write, one group at a time.
	for g := 0; g < n; {
		grp := ix.sorted[g].grp
		end := g + 1
		for end < n && ix.sorted[end].grp == grp {
			end++
		}
		prefix := ix.prefixes[ix.byRank[grp]]
		if err := t.flushEpoch(b, ix.key(&ix.lists[ix.sorted[g].list])[:len(prefix)], g, end); err != nil {
			return fmt.Errorf("write search index: %w", err)
		}
		g = end
	}
	return nil
}

// flushEpoch writes the lists lists[from:to] of flushIndex, which share
// prefix (kind, epoch and, for a kind of two parts, the first: groupLen),
// and their shared list.
func (t *Tx) flushEpoch(b *bolt.Bucket, prefix []byte, from, to int) error {
	ix := t.ix
	sk := append(append(ix.sk[:0], prefix...), idxShared)
	ix.sk = sk
	shared := sharedList(b.Get(sk))
	sb := &ix.shared
	sb.reset()
	si, sn := 0, shared.n()
	for p := from; p < to; p++ {
		l := ix.sorted[p].list
		k := ix.key(&ix.lists[l])
		term := k[len(prefix):]
		// The shared entries before this term stay as they are.
		for ; si < sn; si++ {
			e := shared.entry(si)
			if bytes.Compare(e.term, term) >= 0 {
				break
			}
			sb.add(e.low, e.term)
		}
		own := ix.olds[p]
		free, inArena := t.room(len(own) + 2*int(ix.start[l+1]-ix.start[l]))
		cur := free
		if own != nil {
			cur = append(cur, own...)
		} else if si < sn {
			if e := shared.entry(si); bytes.Equal(e.term, term) {
				cur = append(cur, byte(e.low>>8), byte(e.low))
				si++
			}
		}
		v := applyPostings(cur, ix.order[ix.start[l]:ix.start[l+1]])
		var err error
		switch {
		case len(v) > 2:
			err = b.Put(k, t.keepRoom(free, v, inArena))
		case own != nil:
			err = b.Delete(k)
		}
		if err != nil {
			return err
		}
		if len(v) == 2 {
			sb.add(postingLow(v, 0), term)
		}
	}
	for ; si < sn; si++ {
		e := shared.entry(si)
		sb.add(e.low, e.term)
	}
	free, inArena := t.room(sb.size())
	nv := sb.appendTo(free)
	switch {
	case bytes.Equal(nv, shared):
		return nil
	case len(nv) == 0:
		return b.Delete(sk)
	}
	return b.Put(sk, t.keepRoom(free, nv, inArena))
}

// room is room for n bytes: the arena's (arenaRoom) if it has them, else
// a buffer of its own; inArena says which, for keep.
func (t *Tx) room(n int) (free []byte, inArena bool) {
	if free := t.arenaRoom(); cap(free) >= n {
		return free, true
	}
	return make([]byte, 0, n), false
}

// keepRoom is v, appended to free from room, kept until the transaction ends:
// taken out of the arena's room if free is it.
func (t *Tx) keepRoom(free, v []byte, inArena bool) []byte {
	if inArena {
		return t.claim(free, v)
	}
	return v[:len(v):len(v)]
}
