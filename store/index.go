package store

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
)

// The search index: one bucket of posting lists, kept by InsertJob,
// UpdateJob and DeleteJob in the job's own write transaction, for what
// lists filter on. A key names a term in an epoch of 1,024 seqs, its value
// lists the jobs of that epoch that have the term:
//
//	kind(1) epoch(6) part...  ->  low(2)...
//
// big-endian, where a job's seq is epoch<<epochBits | low, the lows are
// sorted and distinct (a term with no job in an epoch has no key), and each
// part is a length byte then that many bytes or, for a value longer than
// maxIndexedBytes, the byte hashedPart then the value's SHA-256 (32 bytes).
// The kinds and their parts:
//
//	's' status, queue   every job (status is the stored Status string)
//	'q' queue           every job, whatever its status
//	't' type            jobs with a type
//	'k' concurrency key jobs with one
//	'c' schedule        jobs a schedule fired
//	'm' key, value      one entry per metadata entry
//
// Why this shape. The epoch comes first so that a batch of new jobs,
// whatever their terms, writes into the few pages of the newest epoch
// rather than one page per distinct term (a batch of 1,000 jobs of 1,000
// tenants would otherwise rewrite 1,000 pages of the tenant index). A
// posting list per term and epoch makes a batch of jobs that share a term
// one write for it, not one per job, and a job costs 2 bytes per term
// rather than a key of its own. A term's jobs, newest first, are its lists
// from the newest epoch down: a walk seeks once per epoch that has any key
// of the kind (epochCursor), 1,000 seeks for a million jobs. The length
// byte keeps one term's keys from ever being a prefix of another's.
//
// The changes of a transaction are gathered (indexPending) and written
// when it commits (Store.Update) or before it reads the index: a list
// written once per transaction, however many of its jobs changed.
//
// A job is in at most 5 + its metadata entries lists (the API caps metadata
// at api.MaxMapEntries = 64 entries, keys of 128 bytes); a key has at most
// 1 + 6 + 2*(1+128) bytes, a list at most 1,024 lows (2 KiB). The lists
// are a pure function of the job records: an index built from the records
// (index_build.go) holds exactly what keeping it did, so replicas agree
// byte for byte. Only status changes after a job is inserted (queue, type,
// concurrency key, schedule and metadata are set at submit and never
// change; Check catches a write that breaks this), so UpdateJob moves the
// job from one 's' list to another.
var bucketIndex = []byte("index")

// The kinds of index keys.
const (
	idxStatusQueue    byte = 's'
	idxQueue          byte = 'q'
	idxType           byte = 't'
	idxConcurrencyKey byte = 'k'
	idxSchedule       byte = 'c'
	idxMetadata       byte = 'm'
)

const (
	// epochBits is how many low bits of a seq an epoch spans: 1,024 jobs.
	epochBits = 10
	lowMask   = 1<<epochBits - 1
	// maxIndexedBytes is the longest value a key holds as it is; a longer
	// one is held as its SHA-256.
	maxIndexedBytes = 128
	// hashedPart marks a part held as a hash (no length is this large).
	hashedPart = 0xff
)

// appendPart appends one part of an index key.
func appendPart(b []byte, s string) []byte {
	if len(s) <= maxIndexedBytes {
		b = append(b, byte(len(s)))
		return append(b, s...)
	}
	sum := sha256.Sum256([]byte(s))
	b = append(b, hashedPart)
	return append(b, sum[:]...)
}

// appendParts appends the parts of a term.
func appendParts(b []byte, parts ...string) []byte {
	for _, p := range parts {
		b = appendPart(b, p)
	}
	return b
}

// appendEpochKey appends kind|epoch|term, term being encoded parts.
func appendEpochKey(b []byte, kind byte, epoch uint64, term []byte) []byte {
	b = append(b, kind, byte(epoch>>40), byte(epoch>>32), byte(epoch>>24), byte(epoch>>16), byte(epoch>>8), byte(epoch))
	return append(b, term...)
}

// appendIndexKey appends the key of the list that holds seq for the term
// kind, parts.
func appendIndexKey(b []byte, seq uint64, kind byte, parts ...string) []byte {
	e := seq >> epochBits
	b = append(b, kind, byte(e>>40), byte(e>>32), byte(e>>24), byte(e>>16), byte(e>>8), byte(e))
	return appendParts(b, parts...)
}

func getEpoch(b []byte) uint64 {
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}

// postingLow is the i-th low of a list.
func postingLow(v []byte, i int) uint64 { return uint64(v[2*i])<<8 | uint64(v[2*i+1]) }

// eachIndexKey calls fn with the key of every list j belongs in, in a fixed
// order (the metadata by key). The key is valid only during the call; buf
// is scratch, kept grown for the next call.
func eachIndexKey(buf *[]byte, j *Job, fn func(k []byte) error) error {
	emit := func(kind byte, parts ...string) error {
		*buf = appendIndexKey((*buf)[:0], j.Seq, kind, parts...)
		return fn(*buf)
	}
	if err := emit(idxStatusQueue, string(j.Status), j.Queue); err != nil {
		return err
	}
	if err := emit(idxQueue, j.Queue); err != nil {
		return err
	}
	for _, f := range [...]struct {
		kind byte
		v    string
	}{{idxType, j.Type}, {idxConcurrencyKey, j.ConcurrencyKey}, {idxSchedule, j.Schedule}} {
		if f.v == "" {
			continue
		}
		if err := emit(f.kind, f.v); err != nil {
			return err
		}
	}
	if len(j.Metadata) == 0 {
		return nil
	}
	var room [8]string
	keys := room[:0]
	for k := range j.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := emit(idxMetadata, k, j.Metadata[k]); err != nil {
			return err
		}
	}
	return nil
}

// indexKeyCount is how many lists j belongs in.
func indexKeyCount(j *Job) int {
	n := 2 + len(j.Metadata)
	for _, v := range [...]string{j.Type, j.ConcurrencyKey, j.Schedule} {
		if v != "" {
			n++
		}
	}
	return n
}

// indexPending gathers a write transaction's changes to the lists: the
// lists changed, and each change (a low to add or, with dropLow, to drop)
// in order.
type indexPending struct {
	at   map[string]int32 // key -> its index in keys
	keys [][]byte         // in the arena
	ops  []pendingOp
	// scratch of flushIndex, kept for the next transaction
	order       []pendingOp
	start, fill []int32
	lists       []int32
}

type pendingOp struct {
	list int32
	op   uint16
}

const dropLow = 1 << 15

// reset empties ix for the next transaction, keeping its room.
func (ix *indexPending) reset() {
	if ix == nil {
		return
	}
	clear(ix.at)
	ix.keys, ix.ops = ix.keys[:0], ix.ops[:0]
}

// pend notes a change to the list at key.
func (t *Tx) pend(key []byte, low uint64, drop bool) {
	if t.ix == nil {
		t.ix = &indexPending{at: map[string]int32{}}
	}
	ix := t.ix
	list, ok := ix.at[string(key)]
	if !ok {
		list = int32(len(ix.keys))
		kept := t.keepBytes(key)
		ix.at[string(kept)] = list
		ix.keys = append(ix.keys, kept)
	}
	op := uint16(low)
	if drop {
		op |= dropLow
	}
	ix.ops = append(ix.ops, pendingOp{list, op})
}

// indexJob adds j to every list it belongs in.
func (t *Tx) indexJob(j *Job) error {
	if t.noIndex {
		return nil
	}
	low := j.Seq & lowMask
	return eachIndexKey(&t.key, j, func(k []byte) error { t.pend(k, low, false); return nil })
}

// unindexJob drops j from every list it is in.
func (t *Tx) unindexJob(j *Job) error {
	if t.noIndex {
		return nil
	}
	low := j.Seq & lowMask
	return eachIndexKey(&t.key, j, func(k []byte) error { t.pend(k, low, true); return nil })
}

// reindexStatus moves j from its status×queue list of prev to that of
// j.Status.
func (t *Tx) reindexStatus(j *Job, prev Status) error {
	if t.noIndex {
		return nil
	}
	low := j.Seq & lowMask
	t.key = appendIndexKey(t.key[:0], j.Seq, idxStatusQueue, string(prev), j.Queue)
	t.pend(t.key, low, true)
	t.key = appendIndexKey(t.key[:0], j.Seq, idxStatusQueue, string(j.Status), j.Queue)
	t.pend(t.key, low, false)
	return nil
}

// flushIndex writes the transaction's gathered changes to the lists, in
// key order, each list once. Store.Update calls it before committing, and
// plan before it reads the index.
func (t *Tx) flushIndex() error {
	ix := t.ix
	if ix == nil || len(ix.ops) == 0 {
		return nil
	}
	defer ix.reset()
	// The ops grouped by list, each list's in order (a counting sort).
	n := len(ix.keys)
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
	ix.lists = ix.lists[:0]
	for i := range n {
		ix.lists = append(ix.lists, int32(i))
	}
	lists := ix.lists
	slices.SortFunc(lists, func(a, b int32) int { return bytes.Compare(ix.keys[a], ix.keys[b]) })
	b := t.tx.Bucket(bucketIndex)
	for _, l := range lists {
		k := ix.keys[l]
		free := t.arenaRoom()
		v := applyPostings(append(free, b.Get(k)...), ix.order[start[l]:start[l+1]])
		var err error
		if len(v) == 0 {
			err = b.Delete(k)
		} else {
			err = b.Put(k, t.claim(free, v))
		}
		if err != nil {
			return fmt.Errorf("write search index: %w", err)
		}
	}
	return nil
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
