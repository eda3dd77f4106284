package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

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

// rewriteJobs rewrites the job records of an older state format, batch
// records a transaction, then drops keyUpgrading: JSON records (format 1) in
// binary, and records with a dependents list (formats 1 and 2) with the list
// moved into the dependency bucket (deps.go). Decoding JSON records stays
// possible (decodeJob), but a start would pay for it every time (finished
// jobs are never written again), and Digest would differ from a node that
// holds them in binary. The rewrite changes bytes, not state, so the Raft
// log is not involved: JSON kept every field the binary layout keeps (and
// strings that came through JSON commands are valid UTF-8), so a rewritten
// record is the one this version would have written for the job, but for
// its ModifyIndex: format 2 stamped a parent's record when a dependent was
// added, format 3 does not write the parent.
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

// rewriteJobBatch rewrites up to batch job records of an older format
// whose keys come after the key after (nil: from the first), and returns
// the last key it looked at and whether it reached the end.
func (t *Tx) rewriteJobBatch(after []byte, batch int) (last []byte, done bool, err error) {
	type record struct {
		key []byte
		job *Job
	}
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
		j := new(Job)
		if err := decodeJob(v, j); err != nil {
			return nil, false, fmt.Errorf("job %s: %w", k, err)
		}
		if len(v) > 0 && v[0] != '{' && len(j.Dependents) == 0 {
			continue
		}
		todo = append(todo, record{append([]byte(nil), k...), j})
	}
	for _, r := range todo { // not while the cursor walks the bucket
		if err := t.moveDependents(r.job); err != nil {
			return nil, false, err
		}
		if r.job.ID != string(r.key) {
			return nil, false, fmt.Errorf("rewrite job %s: its record names job %q", r.key, r.job.ID)
		}
		if err := t.putJob(r.job); err != nil {
			return nil, false, fmt.Errorf("rewrite job %s: %w", r.key, err)
		}
	}
	return last, k == nil, nil
}

// moveDependents moves a record's dependents list (formats 1 and 2) into the
// dependency bucket and empties it. An id whose job is gone, or is another
// job under a reused id that does not depend on j, is dropped, as readers of
// the list skipped it.
func (t *Tx) moveDependents(j *Job) error {
	for _, id := range j.Dependents {
		d, err := t.Job(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("dependent %s of job %s: %w", id, j.ID, err)
		}
		if d.After != j.ID && !slices.Contains(d.DependsOn, j.ID) {
			continue
		}
		if err := t.AddDependent(j.Seq, d); err != nil {
			return err
		}
	}
	j.Dependents = nil
	return nil
}
