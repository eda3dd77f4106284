package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// ErrNotIndexed means a query has a condition the search index does not
// answer (a Match, or a term of type, concurrency key or schedule without
// a value): CountByStatus counted nothing.
var ErrNotIndexed = errors.New("store: a condition the search index does not answer")

// StatusCounts is what CountByStatus counted.
type StatusCounts struct {
	ByStatus map[Status]int // the statuses with jobs
	// Among is how many of the seqs given to CountByStatus are pending
	// jobs the query selects.
	Among int
}

// epochBitmap is a set of the lows of one epoch.
type epochBitmap [1 << epochBits / 64]uint64

func (b *epochBitmap) has(low uint64) bool { return b[low/64]&(1<<(low%64)) != 0 }
func (b *epochBitmap) set(low uint64)      { b[low/64] |= 1 << (low % 64) }

// fill makes b the lows from to to, both included.
func (b *epochBitmap) fill(from, to uint64) {
	for w := range b {
		lo, hi := uint64(w)*64, uint64(w)*64+63
		switch {
		case hi < from || lo > to:
			b[w] = 0
		default:
			word := ^uint64(0)
			if from > lo {
				word &^= 1<<(from-lo) - 1
			}
			if to < hi {
				word &= 1<<(to-lo+1) - 1
			}
			b[w] = word
		}
	}
}

// count is how many lows b holds.
func (b *epochBitmap) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// CountByStatus counts the jobs q selects, by stored status, from the
// search index alone: no job record is read. q must have no Match and every
// term a value (else ErrNotIndexed); with q.Status it counts that status
// only; q.Limit, q.Scan and q.ScanBytes do not apply. Epoch by epoch of
// q's seq range it intersects the lists of q's terms other than queue into
// a bitmap, then reads the status×queue lists (of q's queue if it names
// one) and counts their jobs in it: a list of an epoch wholly in the range
// counted against no term adds its length. Its cost follows the epochs
// and the lists' lengths, never the records: about 20 ms for a million
// jobs (docs/performance-search.md).
//
// among, ascending seqs, are jobs the caller wants counted apart (the
// FSM's scheduled jobs, which the index cannot tell from pending ones):
// Among is how many of them are pending jobs q selects.
func (t *Tx) CountByStatus(q ListQuery, among []uint64) (StatusCounts, error) {
	out := StatusCounts{ByStatus: map[Status]int{}}
	if q.Match != nil || t.noIndex {
		return out, ErrNotIndexed
	}
	if err := t.flushIndex(); err != nil {
		return out, err
	}
	if err := t.createdRange(&q); err != nil {
		return out, err
	}
	idx := t.tx.Bucket(bucketIndex)
	var (
		queue []byte // the queue's part, nil for any
		terms []*epochCursor
	)
	for _, term := range q.Terms {
		if err := checkTerm(term); err != nil {
			return out, err
		}
		switch term.Field {
		case FieldQueue:
			p := appendParts(nil, term.Value)
			if queue != nil && !bytes.Equal(queue, p) {
				return out, nil // two queues: no job
			}
			queue = p
			continue
		case FieldType, FieldConcurrencyKey, FieldSchedule:
			if term.Value == "" {
				return out, ErrNotIndexed
			}
		}
		ec := &epochCursor{c: idx.Cursor()}
		if term.Field == FieldMetadata {
			ec.kind, ec.term = idxMetadata, appendParts(nil, term.Key, term.Value)
		} else {
			ec.kind, ec.term = termKind[term.Field], appendParts(nil, term.Value)
		}
		terms = append(terms, ec)
	}
	lo, hi := q.After+1, firstSeq(q.Before)
	if hi < lo {
		return out, nil
	}
	statuses := make([][]byte, len(Statuses))
	for i, s := range Statuses {
		statuses[i] = appendParts(nil, string(s))
	}
	pending := appendParts(nil, string(StatusPending))
	var want []byte // q.Status's part, nil for every status
	if q.Status != "" {
		want = appendParts(nil, string(q.Status))
	}
	known, other := make([]int, len(Statuses)), map[string]int{}
	c := idx.Cursor()
	var (
		seek             []byte
		match, amongBits epochBitmap
		ai               int
		e                uint64
	)
	seek = appendEpochKey(seek[:0], idxStatusQueue, lo>>epochBits, nil)
	k, v := c.Seek(seek)
	for k != nil && k[0] == idxStatusQueue && len(k) > 1+epochLen {
		e = getEpoch(k[1 : 1+epochLen])
		if e > hi>>epochBits {
			break
		}
		from, to := uint64(0), uint64(lowMask)
		if e == lo>>epochBits {
			from = lo & lowMask
		}
		if e == hi>>epochBits {
			to = hi & lowMask
		}
		whole := from == 0 && to == lowMask
		// The terms' intersection in e, and the range: match.
		skip := false
		if len(terms) > 0 || !whole {
			match.fill(from, to)
			for _, ec := range terms {
				list := ec.load(e)
				if list == nil {
					skip = true
					break
				}
				var tb epochBitmap
				for i := range len(list) / 2 {
					tb.set(postingLow(list, i))
				}
				for w := range match {
					match[w] &= tb[w]
				}
			}
		}
		amongBits = epochBitmap{}
		hasAmong := false
		for ; ai < len(among) && among[ai]>>epochBits <= e; ai++ {
			if among[ai]>>epochBits == e {
				amongBits.set(among[ai] & lowMask)
				hasAmong = true
			}
		}
		if skip {
			seek = appendEpochKey(seek[:0], idxStatusQueue, e+1, nil)
			k, v = c.Seek(seek)
			continue
		}
		filtered := len(terms) > 0 || !whole
		// Each job is in one status×queue list: when every list counts,
		// the epoch ends once its matches are all found.
		left := -1
		if filtered && want == nil && queue == nil {
			left = match.count()
		}
		for ; k != nil && len(k) > 1+epochLen && k[0] == idxStatusQueue && getEpoch(k[1:1+epochLen]) == e; k, v = c.Next() {
			if left == 0 {
				seek = appendEpochKey(seek[:0], idxStatusQueue, e+1, nil)
				k, v = c.Seek(seek)
				break
			}
			n := groupLen(k)
			if n < 0 {
				return out, fmt.Errorf("search index: malformed key %q", k)
			}
			status := k[1+epochLen : n]
			if want != nil && !bytes.Equal(status, want) {
				continue
			}
			isPending := hasAmong && bytes.Equal(status, pending)
			got := 0
			count := func(low uint64) {
				if filtered && !match.has(low) {
					return
				}
				got++
				if isPending && amongBits.has(low) {
					out.Among++
				}
			}
			if isSharedKey(k) {
				s := sharedList(v)
				for i := range s.n() {
					if en := s.entry(i); queue == nil || bytes.Equal(en.term, queue) {
						count(en.low)
					}
				}
			} else if queue == nil || bytes.Equal(k[n:], queue) {
				if !filtered && !isPending {
					got = len(v) / 2
				} else {
					for i := range len(v) / 2 {
						count(postingLow(v, i))
					}
				}
			}
			if left > 0 {
				left -= got
			}
			if got > 0 {
				if i := slices.IndexFunc(statuses, func(p []byte) bool { return bytes.Equal(p, status) }); i >= 0 {
					known[i] += got
				} else {
					other[string(status)] += got // a status this release does not know
				}
			}
		}
	}
	for i, n := range known {
		if n > 0 {
			out.ByStatus[Statuses[i]] = n
		}
	}
	for p, n := range other {
		out.ByStatus[Status(p[1:])] = n
	}
	return out, nil
}
