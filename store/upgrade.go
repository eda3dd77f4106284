package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// rewriteBatch is how many job records one transaction of rewriteJobs
// rewrites: a few MiB of dirty pages.
const rewriteBatch = 10000

// readableFormat reports whether this binary reads state files of format f.
func readableFormat(f uint64) bool { return f >= oldestFormat && f <= currentFormat }

// stampFormat checks the state format recorded in meta and stamps it
// currentFormat, before any record is written: from then on the file may
// hold records an older binary cannot read, and such a binary refuses it (or
// a snapshot of it) by that stamp rather than failing on a record. It
// reports whether job records of an older format are (still) to be
// rewritten; keyUpgrading keeps that across a crash until rewriteJobs is
// done.
func stampFormat(meta *bolt.Bucket) (upgrade bool, err error) {
	if v := meta.Get(keyFormat); v != nil {
		f := getUint(v)
		if !readableFormat(f) {
			return false, fmt.Errorf("state format %d, this binary reads %d to %d", f, oldestFormat, currentFormat)
		}
		if f < currentFormat {
			if err := meta.Put(keyUpgrading, []byte{1}); err != nil {
				return false, err
			}
		}
	}
	if err := meta.Put(keyFormat, putUint(currentFormat)); err != nil {
		return false, err
	}
	return meta.Get(keyUpgrading) != nil, nil
}

// rewriteJobs rewrites every JSON job record (state format 1) in binary,
// batch records a transaction, then drops keyUpgrading. Decoding them stays
// possible (decodeJob), but a start would pay for it every time (finished
// jobs are never written again), and Digest would differ from a node that
// holds them in binary. The rewrite changes bytes, not state, so the Raft
// log is not involved: JSON kept every field the binary layout keeps (and
// strings that came through JSON commands are valid UTF-8), so a rewritten
// record is the one this version would have written for the job.
func (s *Store) rewriteJobs(batch int) error {
	var after []byte // the last key rewritten
	for {
		done := false
		err := s.Update(func(t *Tx) error {
			var err error
			after, done, err = t.rewriteJobBatch(after, batch)
			if err != nil || !done {
				return err
			}
			return t.tx.Bucket(bucketMeta).Delete(keyUpgrading)
		})
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// rewriteJobBatch rewrites up to batch JSON job records whose keys come
// after the key after (nil: from the first), and returns the last key it
// looked at and whether it reached the end.
func (t *Tx) rewriteJobBatch(after []byte, batch int) (last []byte, done bool, err error) {
	type record struct{ key, value []byte }
	var todo []record
	c := t.tx.Bucket(bucketJobs).Cursor()
	k, v := c.First()
	if after != nil {
		if k, v = c.Seek(after); bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	for ; k != nil && len(todo) < batch; k, v = c.Next() {
		last = append(last[:0], k...)
		if len(v) == 0 || v[0] != '{' {
			continue
		}
		var j Job
		if err := decodeJob(v, &j); err != nil {
			return nil, false, fmt.Errorf("job %s: %w", k, err)
		}
		nv, err := t.encodeJob(&j)
		if err != nil {
			return nil, false, err
		}
		todo = append(todo, record{append([]byte(nil), k...), nv})
	}
	for _, r := range todo { // not while the cursor walks the bucket
		if err := t.tx.Bucket(bucketJobs).Put(r.key, r.value); err != nil {
			return nil, false, fmt.Errorf("rewrite job %s: %w", r.key, err)
		}
	}
	return last, k == nil, nil
}
