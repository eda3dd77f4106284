package store

// The cursors a query of the search index walks (index_query.go): a
// bucket's seq keys, a term's lists epoch by epoch, a queue's lists.

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// seqWalker walks the seqs of one list of jobs down from the newest.
type seqWalker interface {
	// seekLE moves to the largest seq at most s; false when there is none.
	seekLE(s uint64) (uint64, bool)
}

// seqCursor walks the keys prefix+seq(8) of one bucket (seq, status).
type seqCursor struct {
	c      *bolt.Cursor
	prefix []byte
	seek   []byte // scratch
	at     uint64 // the seq the cursor is on, if on
	on     bool
}

func newSeqCursor(b *bolt.Bucket, prefix []byte) *seqCursor {
	return &seqCursor{c: b.Cursor(), prefix: prefix}
}

// land takes the key the bolt cursor moved to.
func (sc *seqCursor) land(k []byte) (uint64, bool) {
	if k == nil || len(k) != len(sc.prefix)+8 || !bytes.HasPrefix(k, sc.prefix) {
		sc.on = false
		return 0, false
	}
	sc.at, sc.on = binary.BigEndian.Uint64(k[len(sc.prefix):]), true
	return sc.at, true
}

// seekLE steps back a few keys before it seeks, so a dense walk down
// costs a step per key rather than a search.
func (sc *seqCursor) seekLE(s uint64) (uint64, bool) {
	if sc.on && sc.at >= s {
		for range 4 {
			if sc.at == s {
				return s, true
			}
			k, _ := sc.c.Prev()
			if got, ok := sc.land(k); !ok || got <= s {
				return got, ok
			}
		}
	}
	sc.seek = binary.BigEndian.AppendUint64(append(sc.seek[:0], sc.prefix...), s)
	k, _ := sc.c.Seek(sc.seek)
	if k != nil && bytes.Equal(k, sc.seek) {
		return sc.land(k)
	}
	if k == nil {
		k, _ = sc.c.Last()
	} else {
		k, _ = sc.c.Prev()
	}
	return sc.land(k)
}

// epochCursor walks one term's lists of the search index (index.go), from
// the newest epoch down.
type epochCursor struct {
	c    *bolt.Cursor
	kind byte
	term []byte // the encoded parts
	seek []byte // scratch
	// shared is scratch: the key of the shared list of the term's group
	shared []byte
	epoch  uint64 // the list the cursor is on, if on
	list   []byte
	i      int // the low it is on, in list
	on     bool
}

// at is the seq the cursor is on.
func (ec *epochCursor) at() uint64 { return ec.epoch<<epochBits | postingLow(ec.list, ec.i) }

// below moves to the largest low of the current list at most low; false
// when every low of it is larger.
func (ec *epochCursor) below(low uint64) bool {
	n := len(ec.list) / 2
	i := sort.Search(n, func(i int) bool { return postingLow(ec.list, i) > low })
	if i == 0 {
		return false
	}
	ec.i = i - 1
	return true
}

// seekLE moves to the largest seq at most s. Walking down one list costs a
// step per job; a list whose every job is above s leads to the next lower
// epoch that has any key of the kind, and to its list of the term if any.
func (ec *epochCursor) seekLE(s uint64) (uint64, bool) {
	epoch, low := s>>epochBits, s&lowMask
	if ec.on && ec.epoch == epoch {
		switch {
		case postingLow(ec.list, ec.i) == low:
			return s, true
		case ec.i > 0 && postingLow(ec.list, ec.i) > low && postingLow(ec.list, ec.i-1) <= low:
			ec.i--
			return ec.at(), true
		case ec.below(low):
			return ec.at(), true
		}
		if epoch == 0 {
			ec.on = false
			return 0, false
		}
		epoch, low = epoch-1, lowMask
	}
	for {
		if list := ec.load(epoch); list != nil {
			ec.epoch, ec.list, ec.on = epoch, list, true
			if ec.below(low) {
				return ec.at(), true
			}
		}
		ec.on = false
		var ok bool
		if epoch, ok = prevEpoch(ec.c, ec.kind, epoch, &ec.seek); !ok {
			return 0, false
		}
		low = lowMask
	}
}

// prevEpoch is the next epoch below epoch that has any key of kind: the
// one of the last key before epoch's. seek is scratch.
func prevEpoch(c *bolt.Cursor, kind byte, epoch uint64, seek *[]byte) (uint64, bool) {
	*seek = appendEpochKey((*seek)[:0], kind, epoch, nil)
	k, _ := c.Seek(*seek)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if len(k) < 1+epochLen || k[0] != kind {
		return 0, false
	}
	return getEpoch(k[1 : 1+epochLen]), true
}

// queueCursor walks the jobs of one queue whatever their status: epoch by
// epoch, the union of the queue's status×queue lists (there is no list of
// a queue alone: it would repeat them).
type queueCursor struct {
	st     []epochCursor // one per status, for load
	c      *bolt.Cursor
	seek   []byte
	bits   [1 << epochBits / 64]uint64 // the union in epoch
	epoch  uint64
	loaded bool // bits is epoch's
	hasAny bool
}

func newQueueCursor(c *bolt.Cursor, queue string) *queueCursor {
	qc := &queueCursor{c: c, st: make([]epochCursor, len(Statuses))}
	for i, s := range Statuses {
		qc.st[i] = epochCursor{c: c, kind: idxStatusQueue, term: appendParts(nil, string(s), queue)}
	}
	return qc
}

// load fills bits with the union of epoch's lists.
func (qc *queueCursor) load(epoch uint64) {
	qc.bits = [len(qc.bits)]uint64{}
	qc.epoch, qc.loaded, qc.hasAny = epoch, true, false
	for i := range qc.st {
		list := qc.st[i].load(epoch)
		for j := range len(list) / 2 {
			l := postingLow(list, j)
			qc.bits[l/64] |= 1 << (l % 64)
			qc.hasAny = true
		}
	}
}

// seekLE moves to the largest seq at most s.
func (qc *queueCursor) seekLE(s uint64) (uint64, bool) {
	epoch, low := s>>epochBits, s&lowMask
	for {
		if !qc.loaded || qc.epoch != epoch {
			qc.load(epoch)
		}
		if qc.hasAny {
			w := low / 64
			word := qc.bits[w] & (^uint64(0) >> (63 - low%64))
			for {
				if word != 0 {
					return epoch<<epochBits | (w*64 + uint64(bits.Len64(word)-1)), true
				}
				if w == 0 {
					break
				}
				w--
				word = qc.bits[w]
			}
		}
		var ok bool
		if epoch, ok = prevEpoch(qc.c, idxStatusQueue, epoch, &qc.seek); !ok {
			return 0, false
		}
		low = lowMask
	}
}

// load is the term's list in epoch: its own key's, or its entry of the
// epoch's shared list (one low); nil if the term has no job in epoch.
func (ec *epochCursor) load(epoch uint64) []byte {
	ec.seek = appendEpochKey(ec.seek[:0], ec.kind, epoch, ec.term)
	k, v := ec.c.Seek(ec.seek)
	if bytes.Equal(k, ec.seek) {
		return v
	}
	n := groupLen(ec.seek)
	if n < 0 {
		return nil
	}
	rest := ec.seek[n:]
	ec.shared = append(append(ec.shared[:0], ec.seek[:n]...), idxShared)
	if !bytes.Equal(k, ec.shared) {
		if k, v = ec.c.Seek(ec.shared); !bytes.Equal(k, ec.shared) {
			return nil
		}
	}
	return sharedList(v).find(rest)
}
