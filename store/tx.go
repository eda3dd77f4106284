package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Tx is one read or write transaction. Write methods fail on a read Tx.
type Tx struct {
	tx    *bolt.Tx
	arena []byte // encoded records and kept values; see encodeJob
	key   []byte // scratch for keys, which bbolt copies
	// scratch is for bytes nothing keeps: a head measured (headLen).
	scratch []byte
	// noIndex skips the search index (index.go); see Store.noIndex.
	noIndex bool
	ix      *indexPending // the search index's changes, written by flushIndex

}

func putUint(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func getUint(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func statusKey(st Status, seq uint64) []byte {
	return appendStatusKey(make([]byte, 0, len(st)+9), st, seq)
}

func appendStatusKey(k []byte, st Status, seq uint64) []byte {
	k = append(k, st...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func (t *Tx) metaUint(key []byte) uint64 { return getUint(t.tx.Bucket(bucketMeta).Get(key)) }

func (t *Tx) putMetaUint(key []byte, v uint64) error {
	return t.tx.Bucket(bucketMeta).Put(key, putUint(v))
}

// Applied is the Raft index of the last applied log entry.
func (t *Tx) Applied() uint64 { return t.metaUint(keyApplied) }

// SetApplied records the last applied Raft index, and that the live jobs'
// heads (see headsCurrent) and the search index (see indexCurrent) are
// whole as of it.
func (t *Tx) SetApplied(index uint64) error {
	if err := t.putMetaUint(keyApplied, index); err != nil {
		return err
	}
	if err := t.putMetaUint(keyHeadsApplied, index); err != nil || t.noIndex {
		return err
	}
	return t.putMetaUint(keyIndexApplied, index)
}

// LastNow is the latest command time applied, in Unix nanoseconds.
func (t *Tx) LastNow() int64 { return int64(t.metaUint(keyLastNow)) }

// SetLastNow records the latest command time applied.
func (t *Tx) SetLastNow(now int64) error { return t.putMetaUint(keyLastNow, uint64(now)) }

// NextLease allocates a fencing token for a claim at the Raft index: the
// index itself unless an earlier token was at or past it (several claims in
// one entry, or a state restored into a new cluster whose log starts over),
// so tokens never repeat and only grow.
func (t *Tx) NextLease(index uint64) (uint64, error) {
	l := max(index, t.metaUint(keyLastLease)+1)
	return l, t.putMetaUint(keyLastLease, l)
}

// NextSeq allocates the next job sequence number (starting at 1).
func (t *Tx) NextSeq() (uint64, error) { return t.NextSeqs(1) }

// NextSeqs allocates n consecutive job sequence numbers (n >= 1) and
// returns the first: the same numbers, and the same stored counter, as n
// calls of NextSeq, in one write.
func (t *Tx) NextSeqs(n int) (uint64, error) {
	if n < 1 {
		return 0, fmt.Errorf("store: allocate %d job seqs: want at least 1", n)
	}
	first := t.metaUint(keyNextSeq) + 1
	return first, t.putMetaUint(keyNextSeq, first+uint64(n)-1)
}

// Job returns the job with the given id, or ErrNotFound.
func (t *Tx) Job(id string) (*Job, error) {
	v := t.tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return nil, ErrNotFound
	}
	j := new(Job)
	if err := decodeJob(v, j); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return j, nil
}

// HasJob reports whether a job with the id exists.
func (t *Tx) HasJob(id string) bool {
	return t.tx.Bucket(bucketJobs).Get([]byte(id)) != nil
}

// InsertJob stores a new job and indexes it; Seq and ID must be set.
func (t *Tx) InsertJob(j *Job, index uint64) error {
	j.ModifyIndex = index
	if err := t.putJob(j); err != nil {
		return err
	}
	// bbolt copies keys but keeps values until the transaction ends: the
	// keys are built in one scratch buffer, the id (the value of both
	// index entries) is kept once, in the arena.
	id := t.keep(j.ID)
	t.key = binary.BigEndian.AppendUint64(t.key[:0], j.Seq)
	if err := t.tx.Bucket(bucketSeq).Put(t.key, id); err != nil {
		return fmt.Errorf("index job %s: %w", j.ID, err)
	}
	t.key = appendStatusKey(t.key[:0], j.Status, j.Seq)
	if err := t.tx.Bucket(bucketStatus).Put(t.key, id); err != nil {
		return fmt.Errorf("index job %s: %w", j.ID, err)
	}
	return t.indexJob(j)
}

// UpdateJob stores a changed job; prev is its status before the change.
func (t *Tx) UpdateJob(j *Job, prev Status, index uint64) error {
	j.ModifyIndex = index
	if err := t.putJob(j); err != nil {
		return err
	}
	if prev == j.Status {
		return nil
	}
	// As in InsertJob: keys in the scratch buffer (bbolt copies them),
	// the id, which bbolt keeps until the transaction ends, in the arena.
	b := t.tx.Bucket(bucketStatus)
	t.key = appendStatusKey(t.key[:0], prev, j.Seq)
	if err := b.Delete(t.key); err != nil {
		return fmt.Errorf("unindex job %s: %w", j.ID, err)
	}
	t.key = appendStatusKey(t.key[:0], j.Status, j.Seq)
	if err := b.Put(t.key, t.keep(j.ID)); err != nil {
		return fmt.Errorf("index job %s: %w", j.ID, err)
	}
	return t.reindexStatus(j, prev)
}

// DeleteJob removes a job, its index entries, its journal of steps
// (steps.go), what it left of sleeps, waits and child jobs (durable.go)
// and its dependency edges both
// ways (its idempotency key is the caller's to keep or drop).
func (t *Tx) DeleteJob(j *Job) error {
	if err := t.deleteEdges(j); err != nil {
		return err
	}
	if err := t.DeleteSteps(j.ID); err != nil {
		return err
	}
	if err := t.DeleteDurable(j.ID); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketJobs).Delete([]byte(j.ID)); err != nil {
		return fmt.Errorf("delete job %s: %w", j.ID, err)
	}
	if err := t.dropHead(j); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketSeq).Delete(putUint(j.Seq)); err != nil {
		return fmt.Errorf("delete job %s: %w", j.ID, err)
	}
	if err := t.SetExpiry(j, 0); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketStatus).Delete(statusKey(j.Status, j.Seq)); err != nil {
		return fmt.Errorf("delete job %s: %w", j.ID, err)
	}
	return t.unindexJob(j)
}

func expiryKey(at int64, seq uint64) []byte {
	return appendExpiryKey(make([]byte, 0, 16), at, seq)
}

func appendExpiryKey(k []byte, at int64, seq uint64) []byte {
	k = binary.BigEndian.AppendUint64(k, uint64(at))
	return binary.BigEndian.AppendUint64(k, seq)
}

// SetExpiry moves a job's entry in the expiry index from j.ExpireAt to at
// (0 = no entry) and sets j.ExpireAt; store the job afterwards.
func (t *Tx) SetExpiry(j *Job, at int64) error {
	b := t.tx.Bucket(bucketExpiry)
	if j.ExpireAt != 0 {
		t.key = appendExpiryKey(t.key[:0], j.ExpireAt, j.Seq)
		if err := b.Delete(t.key); err != nil {
			return fmt.Errorf("expiry of job %s: %w", j.ID, err)
		}
	}
	j.ExpireAt = at
	if at != 0 {
		t.key = appendExpiryKey(t.key[:0], at, j.Seq)
		if err := b.Put(t.key, t.keep(j.ID)); err != nil {
			return fmt.Errorf("expiry of job %s: %w", j.ID, err)
		}
	}
	return nil
}

// Expired lists up to limit ids of jobs whose ExpireAt is at or before now,
// earliest first.
func (t *Tx) Expired(now int64, limit int) []string {
	var out []string
	c := t.tx.Bucket(bucketExpiry).Cursor()
	for k, id := c.First(); k != nil && len(out) < limit; k, id = c.Next() {
		if int64(getUint(k[:8])) > now {
			break
		}
		out = append(out, string(id))
	}
	return out
}

// putJob stores j's record under its id, and keeps its head in the heads
// bucket or not (syncHead): the one place job records are written.
func (t *Tx) putJob(j *Job) error {
	v, err := t.encodeJob(j)
	if err != nil {
		return err
	}
	t.key = append(t.key[:0], j.ID...)
	if err := t.tx.Bucket(bucketJobs).Put(t.key, v); err != nil {
		return fmt.Errorf("put job %s: %w", j.ID, err)
	}
	return t.syncHead(j, v)
}

// Sizes of the chunks of a write transaction's arena.
const (
	minArena = 4 << 10
	maxArena = 64 << 10
)

// encodeJob encodes j into the transaction's arena. bbolt keeps the value of
// a Put until the transaction ends, so records are appended to the arena,
// never written over, and one allocation holds many of them.
func (t *Tx) encodeJob(j *Job) ([]byte, error) {
	free := t.arenaRoom()
	v, err := appendJob(free, j)
	if err != nil {
		return nil, err
	}
	return t.claim(free, v), nil
}

// keep copies s into the arena, for a value bbolt keeps until the
// transaction ends.
func (t *Tx) keep(s string) []byte {
	free := t.arenaRoom()
	return t.claim(free, append(free, s...))
}

// arenaRoom is the arena's free room, a new chunk when little is left.
func (t *Tx) arenaRoom() []byte {
	if cap(t.arena)-len(t.arena) < minArena/4 {
		t.arena = make([]byte, 0, min(max(2*cap(t.arena), minArena), maxArena))
	}
	return t.arena[len(t.arena):]
}

// claim takes v, appended to free (the arena's room), out of the room: if
// it fit, the arena grows over it; else append made v its own.
func (t *Tx) claim(free, v []byte) []byte {
	if cap(v) == cap(free) {
		t.arena = t.arena[:len(t.arena)+len(v)]
	}
	return v[:len(v):len(v)]
}

// IdempotencyKey returns the id of the job holding key and until when the
// key is held whether or not that job still exists (0: only while it
// exists), or ErrNotFound.
func (t *Tx) IdempotencyKey(key string) (id string, until int64, err error) {
	v := t.tx.Bucket(bucketIdem).Get([]byte(key))
	if len(v) < 8 {
		return "", 0, ErrNotFound
	}
	return string(v[8:]), int64(getUint(v[:8])), nil
}

// PutIdempotencyKey records that key belongs to the job id until until.
func (t *Tx) PutIdempotencyKey(key, id string, until int64) error {
	v := append(putUint(uint64(until)), id...)
	return t.tx.Bucket(bucketIdem).Put([]byte(key), v)
}

// DeleteIdempotencyKey frees key.
func (t *Tx) DeleteIdempotencyKey(key string) error {
	return t.tx.Bucket(bucketIdem).Delete([]byte(key))
}

// ForEachJob calls fn for every job in the given status, oldest first. A nil
// status means every job. fn must not modify the store.
func (t *Tx) ForEachJob(status Status, fn func(*Job) error) error {
	if status == "" {
		return t.tx.Bucket(bucketSeq).ForEach(func(_, id []byte) error {
			return t.withJob(id, fn)
		})
	}
	prefix := statusKey(status, 0)[:len(status)+1]
	c := t.tx.Bucket(bucketStatus).Cursor()
	for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, id = c.Next() {
		if err := t.withJob(id, fn); err != nil {
			return err
		}
	}
	return nil
}

// ForEachJobHead calls fn with the head of every job, in id order: what the
// in-memory indexes are rebuilt from, read without decoding whole records.
// The JobHead is reused by the next call (copy it to keep it; its strings
// and Tags may be kept, and its names are shared among the heads). fn must
// not modify the store.
func (t *Tx) ForEachJobHead(fn func(*JobHead) error) error {
	var h JobHead
	names := make(interner)
	return t.tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
		if err := decodeJobHead(v, &h, names); err != nil {
			return fmt.Errorf("job %s: %w", k, err)
		}
		return fn(&h)
	})
}

func (t *Tx) withJob(id []byte, fn func(*Job) error) error {
	j, err := t.Job(string(id))
	if err != nil {
		return err
	}
	return fn(j)
}

// QueuePaused reports whether the named queue is paused.
func (t *Tx) QueuePaused(name string) bool {
	return t.tx.Bucket(bucketQueues).Get([]byte(name)) != nil
}

// SetQueuePaused pauses or resumes the named queue.
func (t *Tx) SetQueuePaused(name string, paused bool) error {
	b := t.tx.Bucket(bucketQueues)
	if paused {
		return b.Put([]byte(name), []byte{1})
	}
	return b.Delete([]byte(name))
}

// PausedQueues lists the paused queues in name order.
func (t *Tx) PausedQueues() []string {
	var out []string
	_ = t.tx.Bucket(bucketQueues).ForEach(func(k, _ []byte) error {
		out = append(out, string(k))
		return nil
	})
	return out
}
