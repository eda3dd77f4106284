package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The live jobs' heads (bucketHeads; docs/DESIGN.md, "A start"): for every
// job whose status is live (Status.Live) the head of its record, keyed by
// its seq, and for no other job. A head is the bytes its record starts
// with: the record's first byte and the head fields (record.go), what
// decodeJobHead reads, so it is decoded as the record is and is, byte for
// byte, a prefix of it. A start rebuilds the FSM's in-memory indexes from
// this bucket in one cursor pass (ForEachLiveHead): at 10,000,000 jobs,
// 7.5 % of them live, about 80 MB of pages, where reading the same
// heads from their records touched a quarter of the jobs bucket's leaves,
// spread over all of it.
//
// putJob and DeleteJob keep it, the only writers of job records: a record
// put puts its head if the job is live and deletes it if not, a job
// deleted deletes it. Keys are seqs, big-endian, so new jobs append at the
// bucket's end and its pages stay full (headsFill). It is derived state,
// outside the Raft log and the state format: a file an older release
// wrote has none, or one it did not keep, and Open builds it
// (heads_build.go); Check compares it with the records.

var bucketHeads = []byte("heads") // seq(8) -> the head of a live job's record

// headsFill is the fill of the heads bucket's pages when they split (bbolt
// defaults to half): its keys are seqs, written mostly at its end, and a
// start reads every page.
const headsFill = 0.9

// LiveStatuses are the statuses whose jobs have their heads kept
// (bucketHeads): those the FSM's in-memory indexes hold beyond a count.
var LiveStatuses = []Status{StatusPending, StatusReserved, StatusRunning, StatusCancelling}

// Live reports whether a job in status s is one of LiveStatuses.
func (s Status) Live() bool {
	return s == StatusPending || s == StatusReserved || s.Leased()
}

// heads is the heads bucket of a write transaction, set to fill its pages
// as headsFill says.
func (t *Tx) heads() *bolt.Bucket {
	b := t.tx.Bucket(bucketHeads)
	b.FillPercent = headsFill
	return b
}

// syncHead makes j's entry in the heads bucket what its record, v (kept in
// the arena until the transaction ends), says: its head when j is live, no
// entry when j is not.
func (t *Tx) syncHead(j *Job, v []byte) error {
	if !j.Status.Live() {
		return t.dropHead(j)
	}
	// Put even when the head is unchanged (a report of progress): most
	// writes of a live job's record are heartbeats, which change its lease
	// deadline, and a Get to compare first cost them a seek each.
	h := v[:t.headLen(j):len(v)]
	t.key = binary.BigEndian.AppendUint64(t.key[:0], j.Seq)
	if err := t.heads().Put(t.key, h); err != nil {
		return fmt.Errorf("put head of job %s: %w", j.ID, err)
	}
	return nil
}

// dropHead deletes j's entry in the heads bucket, if any: j is deleted, or
// not live.
func (t *Tx) dropHead(j *Job) error {
	t.key = binary.BigEndian.AppendUint64(t.key[:0], j.Seq)
	if err := t.heads().Delete(t.key); err != nil {
		return fmt.Errorf("drop head of job %s: %w", j.ID, err)
	}
	return nil
}

// headLen is how many bytes j's record starts with its head: its first
// byte and its head fields, written as appendJob writes them (into the
// transaction's scratch, which it reuses).
func (t *Tx) headLen(j *Job) int {
	v := recordVersion(j)
	w := jobWriter{version: v}
	h := j.Head()
	t.scratch = w.jobHead(append(t.scratch[:0], v), &h)
	return len(t.scratch)
}

// recordHead is the head a stored record v starts with (v[:n]), read: what
// the heads bucket holds for the job when it is live.
func recordHead(v []byte) ([]byte, error) {
	if len(v) > 0 && v[0] == '{' {
		return nil, fmt.Errorf("a JSON record (state format 1) has no head")
	}
	c, err := openRecord(v)
	if err != nil {
		return nil, err
	}
	var h JobHead
	c.jobHead(&h)
	if err := c.R.Err(); err != nil {
		return nil, fmt.Errorf("decode job head: %w", err)
	}
	return v[:len(v)-c.R.Left()], nil
}

// ForEachLiveHead calls fn with the head of every live job (LiveStatuses),
// in seq order, from the heads bucket alone: what a start rebuilds the
// FSM's in-memory indexes from. The JobHead is reused as ForEachJobHead's
// is. A head that does not decode, or is not of the seq it is kept under,
// fails it.
func (t *Tx) ForEachLiveHead(fn func(*JobHead) error) error {
	var h JobHead
	names := make(interner)
	c := t.tx.Bucket(bucketHeads).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := decodeJobHead(v, &h, names); err != nil {
			return fmt.Errorf("head of seq %x: %w", k, err)
		}
		if len(k) != 8 || binary.BigEndian.Uint64(k) != h.Seq || !h.Status.Live() {
			return fmt.Errorf("heads: key %x holds the head of job %s, seq %d, %s", k, h.ID, h.Seq, h.Status)
		}
		if err := fn(&h); err != nil {
			return err
		}
	}
	return nil
}

// checkHead checks the heads bucket's entry for the job j of record v; the
// caller counts the live jobs and checks the bucket holds no more.
func (t *Tx) checkHead(j *Job, v []byte) error {
	got := t.tx.Bucket(bucketHeads).Get(putUint(j.Seq))
	if !j.Status.Live() {
		if got != nil {
			return fmt.Errorf("job %s: %s, but its head is kept among the live jobs'", j.ID, j.Status)
		}
		return nil
	}
	want, err := recordHead(v)
	if err != nil {
		return fmt.Errorf("job %s: %w", j.ID, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("job %s: %s, its kept head %x, its record's %x", j.ID, j.Status, got, want)
	}
	return nil
}

// headsKept reports whether the file's heads bucket is current
// (headsCurrent). A file an older release wrote (a backup being checked)
// may have none, or a stale one.
func (t *Tx) headsKept() bool { return headsCurrent(t.tx.Bucket(bucketMeta)) }
