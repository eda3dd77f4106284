package store

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
)

// The search index: one bucket of keys, no values, maintained by InsertJob,
// UpdateJob and DeleteJob in the job's own write transaction, for what
// lists filter on. Every key is
//
//	kind(1) epoch(6) part... low(2)
//
// all big-endian, where a job's seq is epoch<<epochBits | low, and each
// part is a length byte then that many bytes, or, for a value longer than
// maxIndexedBytes, the byte hashedPart then the value's SHA-256 (32 bytes).
// The kinds and their parts:
//
//	's' status, queue   every job (status is the stored Status string)
//	'q' queue           every job, whatever its status
//	't' type            jobs with a type
//	'k' concurrency key jobs with one
//	'c' schedule        jobs a schedule fired
//	'm' key, value      one per metadata entry
//
// The epoch comes before the term so that a batch of new jobs, whatever
// their terms, writes its keys into the few pages of the newest epoch
// rather than into one page per distinct term (a batch of 1,000 jobs of
// 1,000 tenants would otherwise rewrite 1,000 pages of the tenant index:
// about 10 times the bytes of their records). A term's jobs are then its
// keys under kind|epoch|parts in each epoch, in seq (creation) order: a
// walk seeks once per epoch that has any key of the kind (epochCursor),
// 1,000 seeks for a million jobs. The length byte keeps one term's keys
// from ever being a prefix of another's.
//
// A job has at most 5 + its metadata entries keys (the API caps metadata
// at api.MaxMapEntries = 64 entries, keys of 128 bytes), and a key at most
// 1 + 6 + 2*(1+128) + 2 bytes. The entries are a pure function of the job
// records: an index built from the records (index_build.go) holds exactly
// the keys that maintaining it did, so replicas agree byte for byte. Only
// status changes after a job is inserted (queue, type, concurrency key,
// schedule and metadata are set at submit and never change; Check catches a
// write that breaks this), so UpdateJob moves the one 's' entry.
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

// appendEpochKey appends kind|epoch|term|low, term being encoded parts.
func appendEpochKey(b []byte, kind byte, epoch uint64, term []byte, low uint64) []byte {
	b = append(b, kind, 0, 0, 0, 0, 0, 0)
	putEpoch(b[len(b)-6:], epoch)
	b = append(b, term...)
	return append(b, byte(low>>8), byte(low))
}

// appendIndexKey appends the key of seq for the term kind, parts.
func appendIndexKey(b []byte, seq uint64, kind byte, parts ...string) []byte {
	b = append(b, kind, 0, 0, 0, 0, 0, 0)
	putEpoch(b[len(b)-6:], seq>>epochBits)
	b = appendParts(b, parts...)
	low := seq & lowMask
	return append(b, byte(low>>8), byte(low))
}

func putEpoch(b []byte, e uint64) {
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(e>>40), byte(e>>32), byte(e>>24), byte(e>>16), byte(e>>8), byte(e)
}

func getEpoch(b []byte) uint64 {
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}

// eachIndexKey calls fn with every index key of j, in a fixed order (the
// metadata by key). The key is valid only during the call.
// buf is scratch, kept grown for the next call.
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
	for _, f := range []struct {
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
	for _, k := range slices.Sorted(maps.Keys(j.Metadata)) {
		if err := emit(idxMetadata, k, j.Metadata[k]); err != nil {
			return err
		}
	}
	return nil
}

// indexKeyCount is how many index keys j has.
func indexKeyCount(j *Job) int {
	n := 2 + len(j.Metadata)
	for _, v := range []string{j.Type, j.ConcurrencyKey, j.Schedule} {
		if v != "" {
			n++
		}
	}
	return n
}

// emptyValue is the value of every index key.
var emptyValue = []byte{}

// indexJob puts every index key of j.
func (t *Tx) indexJob(j *Job) error {
	if t.noIndex {
		return nil
	}
	b := t.tx.Bucket(bucketIndex)
	err := eachIndexKey(&t.key, j, func(k []byte) error { return b.Put(k, emptyValue) })
	if err != nil {
		return fmt.Errorf("index job %s: %w", j.ID, err)
	}
	return nil
}

// unindexJob deletes every index key of j.
func (t *Tx) unindexJob(j *Job) error {
	if t.noIndex {
		return nil
	}
	b := t.tx.Bucket(bucketIndex)
	err := eachIndexKey(&t.key, j, func(k []byte) error { return b.Delete(k) })
	if err != nil {
		return fmt.Errorf("unindex job %s: %w", j.ID, err)
	}
	return nil
}

// reindexStatus moves j's status×queue key from prev to j.Status.
func (t *Tx) reindexStatus(j *Job, prev Status) error {
	if t.noIndex {
		return nil
	}
	b := t.tx.Bucket(bucketIndex)
	t.key = appendIndexKey(t.key[:0], j.Seq, idxStatusQueue, string(prev), j.Queue)
	if err := b.Delete(t.key); err != nil {
		return fmt.Errorf("unindex job %s: %w", j.ID, err)
	}
	t.key = appendIndexKey(t.key[:0], j.Seq, idxStatusQueue, string(j.Status), j.Queue)
	if err := b.Put(t.key, emptyValue); err != nil {
		return fmt.Errorf("index job %s: %w", j.ID, err)
	}
	return nil
}
