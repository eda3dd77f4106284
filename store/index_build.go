package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// Building the search index (index.go) from the job records, for a state
// file that has none (written by a release before it, or restored from such
// a release's snapshot) or one that an older release wrote to since.
//
// The index is derived from the job records, locally, like the status
// bucket: no command carries it and the Raft log is unchanged, so nodes of
// the release before and of this one apply the same log during a rolling
// upgrade, and the state format stays the same (an older binary opens the
// file and ignores the bucket). What an older binary does not do is keep
// the index: it applies entries and moves keyApplied without it. So the
// index is current only when the meta bucket says so: keyIndexFormat is
// indexFormat, and keyIndexApplied, which SetApplied writes with
// keyApplied in every apply, equals keyApplied. Otherwise Open builds it
// again, before anything reads or writes the store: on a node's first start
// of this release, and on every Restore of a snapshot from a leader of the
// release before.
//
// The build empties the bucket, then indexes indexBuildBatch jobs per
// write transaction in seq order, noting after each the last seq done
// under keyIndexBuilding (with the applied index it started at), so a
// crash resumes where it stopped, or starts again if the file changed
// meanwhile. The result is the same bytes whatever the batch and however
// often it was cut short, since the keys are a function of the records:
// every replica ends with the same index, and the same Digest.
var (
	keyIndexFormat   = []byte("index_format")   // indexFormat once built
	keyIndexApplied  = []byte("index_applied")  // applied index the index is whole at
	keyIndexBuilding = []byte("index_building") // applied(8) last seq done(8), while building
)

const (
	// indexFormat numbers the layout of the search index; a file whose
	// index has another number has it built again. 1: a key per term and
	// epoch; 2: a term of one job in its epoch in the epoch's shared list.
	indexFormat = uint64(2)
	// indexBuildBatch is how many jobs one transaction of the build
	// indexes: about 6 keys each, a few MiB of dirty pages.
	indexBuildBatch = 10000
)

// indexCurrent reports whether the search index of the file whose meta
// bucket is meta agrees with its job records.
func indexCurrent(meta *bolt.Bucket) bool {
	return getUint(meta.Get(keyIndexFormat)) == indexFormat &&
		meta.Get(keyIndexBuilding) == nil &&
		getUint(meta.Get(keyIndexApplied)) == getUint(meta.Get(keyApplied))
}

// buildIndex builds the search index unless it is current, batch jobs a
// transaction.
func (s *Store) buildIndex(batch int) error {
	if s.noIndex {
		return nil
	}
	var from uint64 // the last seq indexed
	done := false
	err := s.Update(func(t *Tx) error {
		meta := t.tx.Bucket(bucketMeta)
		if indexCurrent(meta) {
			done = true
			return nil
		}
		applied := meta.Get(keyApplied)
		if v := meta.Get(keyIndexBuilding); len(v) == 16 && bytes.Equal(v[:8], putUint(getUint(applied))) {
			from = getUint(v[8:]) // resume: nothing changed since
			return nil
		}
		if err := t.tx.DeleteBucket(bucketIndex); err != nil {
			return fmt.Errorf("empty the search index: %w", err)
		}
		if _, err := t.tx.CreateBucket(bucketIndex); err != nil {
			return fmt.Errorf("create the search index: %w", err)
		}
		return meta.Put(keyIndexBuilding, binary.BigEndian.AppendUint64(putUint(getUint(applied)), 0))
	})
	if err != nil || done {
		return err
	}
	for !done {
		err := s.Update(func(t *Tx) error {
			var err error
			from, done, err = t.indexBatch(from, batch)
			if err != nil {
				return err
			}
			meta := t.tx.Bucket(bucketMeta)
			if !done {
				v := binary.BigEndian.AppendUint64(putUint(t.Applied()), from)
				return meta.Put(keyIndexBuilding, v)
			}
			if err := meta.Delete(keyIndexBuilding); err != nil {
				return err
			}
			if err := t.putMetaUint(keyIndexFormat, indexFormat); err != nil {
				return err
			}
			return t.putMetaUint(keyIndexApplied, t.Applied())
		})
		if err != nil {
			return fmt.Errorf("build the search index: %w", err)
		}
	}
	return nil
}

// indexBatch indexes up to batch jobs with seqs after after, and returns
// the last seq it indexed and whether it reached the end.
func (t *Tx) indexBatch(after uint64, batch int) (last uint64, done bool, err error) {
	last = after
	c := t.tx.Bucket(bucketSeq).Cursor()
	jobs := t.tx.Bucket(bucketJobs)
	k, id := c.Seek(putUint(after + 1))
	for n := 0; k != nil && n < batch; k, id = c.Next() {
		v := jobs.Get(id)
		if v == nil {
			return 0, false, fmt.Errorf("job %s of seq %d: %w", id, getUint(k), ErrNotFound)
		}
		j := new(Job)
		if err := decodeJob(v, j); err != nil {
			return 0, false, fmt.Errorf("job %s: %w", id, err)
		}
		if err := t.indexJob(j); err != nil {
			return 0, false, err
		}
		last = j.Seq
		n++
	}
	return last, k == nil, nil
}

// checkIndex checks that the search index holds exactly the keys of jobs,
// when the file says it is current (else Open builds it). keys counts the
// keys the jobs seen so far should have; call it per job, then finish.
type indexChecker struct {
	t       *Tx
	current bool
	keys    int
	sk      []byte // scratch
}

func newIndexChecker(t *Tx) *indexChecker {
	ic := &indexChecker{t: t, current: !t.noIndex && t.tx.Bucket(bucketIndex) != nil && indexCurrent(t.tx.Bucket(bucketMeta))}
	return ic
}

// job checks that j is in every list it belongs in.
func (ic *indexChecker) job(j *Job) error {
	if !ic.current {
		return nil
	}
	ic.keys += indexKeyCount(j)
	b := ic.t.tx.Bucket(bucketIndex)
	low := j.Seq & lowMask
	return eachIndexKey(&ic.t.key, j, func(k []byte) error {
		v := b.Get(k)
		if v == nil {
			n := groupLen(k)
			ic.sk = append(append(ic.sk[:0], k[:n]...), idxShared)
			v = sharedList(b.Get(ic.sk)).find(k[n:])
		} else if len(v) < 4 {
			return fmt.Errorf("search index list %q: %d bytes, a list of one job belongs in the shared list", k, len(v))
		}
		n := len(v) / 2
		if i := sort.Search(n, func(i int) bool { return postingLow(v, i) >= low }); i == n || postingLow(v, i) != low {
			return fmt.Errorf("job %s: search index list %q lacks it", j.ID, k)
		}
		return nil
	})
}

// finish checks that every list is sorted and the lists hold no other jobs.
func (ic *indexChecker) finish() error {
	if !ic.current {
		return nil
	}
	n := 0
	err := ic.t.tx.Bucket(bucketIndex).ForEach(func(k, v []byte) error {
		if isSharedKey(k) {
			m, err := checkShared(k, v)
			n += m
			return err
		}
		if len(v) == 2 {
			return fmt.Errorf("search index list %q: a list of one job belongs in the shared list", k)
		}
		if len(v) < 4 || len(v)%2 != 0 || len(k) < 7 {
			return fmt.Errorf("search index list %q: %d bytes", k, len(v))
		}
		for i := range len(v) / 2 {
			if postingLow(v, i) > lowMask || (i > 0 && postingLow(v, i) <= postingLow(v, i-1)) {
				return fmt.Errorf("search index list %q: not sorted lows", k)
			}
		}
		n += len(v) / 2
		return nil
	})
	if err != nil {
		return err
	}
	if n != ic.keys {
		return fmt.Errorf("search index lists hold %d entries for %d of the jobs' terms", n, ic.keys)
	}
	return nil
}

// checkShared checks a shared list (index.go) and returns how many
// entries it holds.
func checkShared(k, v []byte) (int, error) {
	s := sharedList(v)
	n := s.n()
	if n == 0 {
		return 0, fmt.Errorf("search index shared list %q: malformed or empty (%d bytes)", k, len(v))
	}
	var prev []byte
	for i := range n {
		e := s.entry(i)
		if e.term == nil || e.low > lowMask || (i > 0 && bytes.Compare(prev, e.term) >= 0) {
			return 0, fmt.Errorf("search index shared list %q: entry %d malformed or out of order", k, i)
		}
		prev = e.term
	}
	if !bytes.Equal(appendShared(nil, sharedEntries(s)), v) {
		return 0, fmt.Errorf("search index shared list %q: not in its canonical form", k)
	}
	return n, nil
}

// sharedEntries lists the entries of s.
func sharedEntries(s sharedList) []sharedEntry {
	out := make([]sharedEntry, s.n())
	for i := range out {
		out[i] = s.entry(i)
	}
	return out
}
