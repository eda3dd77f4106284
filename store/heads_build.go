package store

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Building the heads bucket (heads.go) from the job records, for a state
// file that has none (written by a release before it, or restored from such
// a release's snapshot) or one that an older release wrote to since.
//
// As the search index (index_build.go), the bucket is derived from the job
// records, locally: no command carries it and the Raft log is unchanged,
// and the state format stays the same, so an older binary opens the file,
// and installs a snapshot of it, and ignores the bucket. What it does not
// do is keep it: it applies entries and moves keyApplied without it. So
// the bucket is current only while keyHeadsApplied, which SetApplied
// writes with keyApplied in every apply, equals keyApplied; Open deletes
// keyHeadsApplied when it has to create the bucket. Otherwise Open builds
// it again before anything reads or writes the store: on a node's first
// start of this release, after a rollback to an older release and back,
// and on every Restore of a snapshot an older release took.
//
// The build drops keyHeadsApplied and empties the bucket, then puts the
// head of every live job, found through the status index, from its
// record, headsBatch jobs a write transaction, and writes keyHeadsApplied
// last: a crash mid-way leaves the key absent, and the next Open starts
// again. The result is the same bytes however often it was cut short:
// every replica ends with the same bucket, and the same Digest.
var keyHeadsApplied = []byte("heads_applied") // applied index the heads bucket is whole at

// headsBatch is how many heads one transaction of buildHeads puts: a few
// MiB of dirty pages.
const headsBatch = 50000

// headsCurrent reports whether the heads bucket of the file whose meta
// bucket is meta agrees with its job records.
func headsCurrent(meta *bolt.Bucket) bool {
	v := meta.Get(keyHeadsApplied)
	return v != nil && getUint(v) == getUint(meta.Get(keyApplied))
}

// buildHeads builds the heads bucket unless it is current, batch jobs a
// transaction.
func (s *Store) buildHeads(batch int) error {
	done := false
	err := s.Update(func(t *Tx) error {
		meta := t.tx.Bucket(bucketMeta)
		if done = headsCurrent(meta); done {
			return nil
		}
		if err := meta.Delete(keyHeadsApplied); err != nil {
			return err
		}
		if err := t.tx.DeleteBucket(bucketHeads); err != nil {
			return fmt.Errorf("empty the heads bucket: %w", err)
		}
		_, err := t.tx.CreateBucket(bucketHeads)
		return err
	})
	if err != nil || done {
		return err
	}
	var after []byte // the last status index key done
	for !done {
		err := s.Update(func(t *Tx) error {
			var err error
			if after, done, err = t.headsBatch(after, batch); err != nil || !done {
				return err
			}
			return t.putMetaUint(keyHeadsApplied, t.Applied())
		})
		if err != nil {
			return fmt.Errorf("build the live jobs' heads: %w", err)
		}
	}
	return nil
}

// headsBatch puts the heads of up to batch live jobs whose status index
// keys come after after (nil: from the first), and returns the last key
// done and whether it reached the end.
func (t *Tx) headsBatch(after []byte, batch int) (last []byte, done bool, err error) {
	c := t.tx.Bucket(bucketStatus).Cursor()
	jobs, heads := t.tx.Bucket(bucketJobs), t.heads()
	n := 0
	for _, st := range slices.Sorted(slices.Values(LiveStatuses)) { // the index's order
		prefix := statusKey(st, 0)[:len(st)+1]
		k, id := c.Seek(prefix)
		if bytes.Compare(after, prefix) >= 0 {
			if k, id = c.Seek(after); bytes.Equal(k, after) {
				k, id = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, id = c.Next() {
			if n == batch {
				return last, false, nil
			}
			v := jobs.Get(id)
			if v == nil {
				return nil, false, fmt.Errorf("job %s of the status index: %w", id, ErrNotFound)
			}
			h, err := recordHead(v)
			if err != nil {
				return nil, false, fmt.Errorf("job %s: %w", id, err)
			}
			if err := heads.Put(k[len(prefix):], t.keep(string(h))); err != nil {
				return nil, false, fmt.Errorf("put head of job %s: %w", id, err)
			}
			last = append(last[:0], k...)
			n++
		}
	}
	return last, true, nil
}
