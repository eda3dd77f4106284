package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Dependency edges live in their own bucket, not in the parent's record, so
// that adding one is a Put whatever the parent's size (state format 3; a job
// record's Dependents, which format 2 filled, is written empty and read
// only by the upgrade). The bucket holds, per parent:
//
//	parent seq(8)          -> count(8): how many edges start at the parent
//	parent seq(8) seq(8)   -> the dependent's id, one key per edge
//
// so a parent's dependents are a prefix scan in the order they were added
// (by their seq), and their number is one Get.

func edgeKey(parent, child uint64) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 16), parent)
	return binary.BigEndian.AppendUint64(k, child)
}

// AddDependent records that child depends on (or runs after) the job of
// seq parent: one Put for the edge and one for the parent's count, whatever
// the parent's size. Adding an edge twice changes nothing. Neither job needs
// to be stored yet; child's Seq and ID must be set.
func (t *Tx) AddDependent(parent uint64, child *Job) error {
	b := t.tx.Bucket(bucketDeps)
	k := edgeKey(parent, child.Seq)
	if b.Get(k) != nil {
		return nil
	}
	if err := b.Put(k, []byte(child.ID)); err != nil {
		return fmt.Errorf("add dependent %s of job seq %d: %w", child.ID, parent, err)
	}
	return t.addDependentCount(parent, 1)
}

func (t *Tx) addDependentCount(parent uint64, delta int64) error {
	b := t.tx.Bucket(bucketDeps)
	k := putUint(parent)
	n := int64(getUint(b.Get(k))) + delta
	if n <= 0 {
		return b.Delete(k)
	}
	if err := b.Put(k, putUint(uint64(n))); err != nil {
		return fmt.Errorf("count dependents of job seq %d: %w", parent, err)
	}
	return nil
}

// DependentCount is how many jobs depend on (or run after) the job of seq
// parent: one Get.
func (t *Tx) DependentCount(parent uint64) int {
	return int(getUint(t.tx.Bucket(bucketDeps).Get(putUint(parent))))
}

// Dependents lists the ids of the jobs that depend on (or run after) the
// job of seq parent, in the order they were added.
func (t *Tx) Dependents(parent uint64) []string {
	var out []string
	prefix := putUint(parent)
	c := t.tx.Bucket(bucketDeps).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) == 16 {
			out = append(out, string(v))
		}
	}
	return out
}

// DependentsAfter lists up to limit dependents of the job of seq parent
// that were added after the one of seq after (0: from the first), in the
// order they were added, with their seqs: a bounded step of a walk that
// Dependents would take in one.
func (t *Tx) DependentsAfter(parent, after uint64, limit int) (ids []string, seqs []uint64) {
	prefix := putUint(parent)
	c := t.tx.Bucket(bucketDeps).Cursor()
	for k, v := c.Seek(edgeKey(parent, after+1)); k != nil && bytes.HasPrefix(k, prefix) && len(ids) < limit; k, v = c.Next() {
		if len(k) == 16 {
			ids = append(ids, string(v))
			seqs = append(seqs, getUint(k[8:]))
		}
	}
	return ids, seqs
}

// deleteEdges removes the edges of a job being deleted: those to its
// dependents, and those from the jobs it depends on (or ran after) that
// still exist.
func (t *Tx) deleteEdges(j *Job) error {
	b := t.tx.Bucket(bucketDeps)
	prefix := putUint(j.Seq)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys { // not while the cursor walks the bucket
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("delete dependents of job %s: %w", j.ID, err)
		}
	}
	parents := j.DependsOn
	if j.After != "" {
		parents = append(parents[:len(parents):len(parents)], j.After)
	}
	for _, id := range parents {
		p, err := t.JobHead(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		k := edgeKey(p.Seq, j.Seq)
		if b.Get(k) == nil {
			continue
		}
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("delete job %s as a dependent of %s: %w", j.ID, id, err)
		}
		if err := t.addDependentCount(p.Seq, -1); err != nil {
			return err
		}
	}
	return nil
}

// JobHead returns the head of the job with the given id (its record's
// head only, however large the rest), or ErrNotFound.
func (t *Tx) JobHead(id string) (*JobHead, error) {
	v := t.tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return nil, ErrNotFound
	}
	h := new(JobHead)
	if err := decodeJobHead(v, h, nil); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return h, nil
}

// checkEdges verifies the dependency bucket: every edge names the job of
// its seq, starts at an existing job, and every count is its edges'. A file
// of a format before 3 has no such bucket: nothing to check.
func (t *Tx) checkEdges() error {
	deps := t.tx.Bucket(bucketDeps)
	if deps == nil {
		return nil
	}
	counts := make(map[uint64]uint64)
	edges := make(map[uint64]uint64)
	err := deps.ForEach(func(k, v []byte) error {
		switch len(k) {
		case 8:
			counts[getUint(k)] = getUint(v)
		case 16:
			parent, child := getUint(k[:8]), getUint(k[8:])
			edges[parent]++
			if got := t.tx.Bucket(bucketSeq).Get(putUint(child)); string(got) != string(v) {
				return fmt.Errorf("edge %d -> %d names %q, the seq index %q", parent, child, v, got)
			}
			if t.tx.Bucket(bucketSeq).Get(putUint(parent)) == nil {
				return fmt.Errorf("edge %d -> %d starts at no job", parent, child)
			}
		default:
			return fmt.Errorf("dependency key %x has %d bytes", k, len(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for p, n := range edges {
		if counts[p] != n {
			return fmt.Errorf("job seq %d counts %d dependents, has %d", p, counts[p], n)
		}
	}
	for p, n := range counts {
		if edges[p] != n {
			return fmt.Errorf("job seq %d counts %d dependents, has %d", p, n, edges[p])
		}
	}
	return nil
}
