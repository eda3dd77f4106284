package store

import "crypto/sha256"

// The search index: one bucket of posting lists, kept by InsertJob,
// UpdateJob and DeleteJob in the job's own write transaction, for what
// lists filter on. A key names a term in an epoch of 1,024 seqs, its value
// lists the jobs of that epoch that have the term:
//
//	kind(1) epoch(6) part...  ->  low(2)...
//
// big-endian, where a job's seq is epoch<<epochBits | low, the lows are
// sorted and distinct, and each part is a length byte then that many bytes
// or, for a value longer than maxIndexedBytes, the byte hashedPart then the
// value's SHA-256 (32 bytes). The kinds and their parts:
//
//	's' status, queue   every job (status is the stored Status string)
//	't' type            jobs with a type
//	'k' concurrency key jobs with one
//	'c' schedule        jobs a schedule fired
//	'm' key, value      one entry per metadata entry
//
// A term with two jobs or more in an epoch has a key of its own; a term with
// one has none, but an entry in its group's shared list instead; a term with
// none, neither. A group is the terms of one kind and epoch and, for the
// kinds of two parts, of one first part (groupLen); its shared list is
// under the group's prefix then idxShared (sharedList gives the value).
// There is no list of a queue alone: a queue term reads the union of the
// queue's status×queue lists (queueCursor).
//
// Why this shape. The epoch comes first so that a batch of new jobs,
// whatever their terms, writes into the few pages of the newest epoch
// rather than one page per distinct term (a batch of 1,000 jobs of 1,000
// tenants would otherwise rewrite 1,000 pages of the tenant index). A
// posting list per term and epoch makes a batch of jobs that share a term
// one write for it, not one per job, and a job costs 2 bytes per term
// rather than a key of its own. The shared lists do the same for the terms
// that are rare in their epoch (a value of its own per job, the worst case
// of a batch): one value rewritten per batch and group rather than a key
// put per job, at about 8 bytes a term (index format 2; format 1 gave each
// its key). A term's jobs, newest first, are its lists from the newest epoch
// down: a walk seeks once or twice per epoch that has any key of the kind
// (epochCursor), a few thousand seeks for a million jobs. The length byte
// keeps one term's keys from ever being a prefix of another's, and
// idxShared (never a length) a shared key from being a term's.
//
// The changes of a transaction are gathered (indexPending) and written
// when it commits (Store.Update) or before it reads the index: a list
// written once per transaction, however many of its jobs changed.
//
// A job is in at most 4 + its metadata entries lists (the API caps metadata
// at api.MaxMapEntries = 64 entries, keys of 128 bytes); a key has at most
// 1 + 6 + 2*(1+128) bytes, a list at most 1,024 lows (2 KiB), a shared list
// at most 1,024 entries of 2 + 4 + 1 + 128 bytes. The lists are a pure
// function of the job records: an index built from the records
// (index_build.go) holds exactly what keeping it did, so replicas agree
// byte for byte. Only status changes after a job is inserted (queue, type,
// concurrency key, schedule and metadata are set at submit and never
// change; Check catches a write that breaks this), so UpdateJob moves the
// job from one 's' list to another.
var bucketIndex = []byte("index")

// The kinds of index keys.
const (
	idxStatusQueue    byte = 's'
	idxType           byte = 't'
	idxConcurrencyKey byte = 'k'
	idxSchedule       byte = 'c'
	idxMetadata       byte = 'm'
	// idxShared, in place of a term's (last) part, makes the key of a
	// shared list: kind(1) epoch(6) [first part] idxShared (groupLen).
	idxShared byte = 0xfe
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
	// epochLen is the bytes of an epoch in a key.
	epochLen = 6
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

// eachIndexKey calls fn with the key of every list j belongs in, the
// metadata's in the map's order: what is written does not depend on it
// (flushIndex sorts the lists, Check looks each key up). The key is valid only during the call; buf
// is scratch, kept grown for the next call.
func eachIndexKey(buf *[]byte, j *Job, fn func(k []byte) error) error {
	emit := func(kind byte, parts ...string) error {
		k := appendIndexKey((*buf)[:0], j.Seq, kind, parts...)
		// Keep the buffer only when it grew: storing a slice into the
		// Tx costs a write barrier while the collector runs.
		if cap(k) > cap(*buf) {
			*buf = k[:0]
		}
		return fn(k)
	}
	if err := emit(idxStatusQueue, string(j.Status), j.Queue); err != nil {
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
	for k, v := range j.Metadata {
		if err := emit(idxMetadata, k, v); err != nil {
			return err
		}
	}
	return nil
}

// indexKeyCount is how many lists j belongs in.
func indexKeyCount(j *Job) int {
	n := 1 + len(j.Metadata)
	for _, v := range [...]string{j.Type, j.ConcurrencyKey, j.Schedule} {
		if v != "" {
			n++
		}
	}
	return n
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
