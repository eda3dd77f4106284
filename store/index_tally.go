package store

import (
	"bytes"
	"fmt"
)

// What a start rebuilds the FSM's in-memory indexes from without reading
// every job record: the counts of jobs by queue and status from the search
// index, and the heads of the live jobs from their bucket (heads.go).

// JobCounts counts every job by queue and stored status from the search
// index's status×queue lists (index.go): their lengths, and the entries of
// the shared lists. No job record is read, but one for each queue whose
// name the index holds as a hash (longer than maxIndexedBytes), to learn
// it. It reads 2 bytes a job of the index, about 20 MB for 10,000,000
// jobs. Without the index it is ErrNotIndexed.
func (t *Tx) JobCounts() (map[string]map[Status]int, error) {
	if t.noIndex {
		return nil, ErrNotIndexed
	}
	if err := t.flushIndex(); err != nil {
		return nil, err
	}
	out := make(map[string]map[Status]int)
	names := make(map[string]string) // a queue's part -> its name
	var (
		status   Status
		statusOf []byte // the part status is of
	)
	add := func(k, part []byte, epoch, low uint64, n int) error {
		if l := partLen(part); l < 0 || l != len(part) {
			return fmt.Errorf("search index: malformed key %q", k)
		}
		name, ok := names[string(part)]
		if !ok {
			var err error
			if name, err = t.partName(part, epoch<<epochBits|low); err != nil {
				return fmt.Errorf("search index: key %q: %w", k, err)
			}
			names[string(part)] = name
		}
		q := out[name]
		if q == nil {
			q = make(map[Status]int)
			out[name] = q
		}
		q[status] += n
		return nil
	}
	c := t.tx.Bucket(bucketIndex).Cursor()
	for k, v := c.Seek([]byte{idxStatusQueue}); k != nil && k[0] == idxStatusQueue; k, v = c.Next() {
		n := groupLen(k)
		if n < 0 || k[1+epochLen] == hashedPart {
			return nil, fmt.Errorf("search index: malformed key %q", k)
		}
		if sp := k[1+epochLen : n]; !bytes.Equal(sp, statusOf) {
			statusOf, status = append(statusOf[:0], sp...), Status(sp[1:])
		}
		epoch := getEpoch(k[1 : 1+epochLen])
		if isSharedKey(k) {
			s := sharedList(v)
			for i := range s.n() {
				en := s.entry(i)
				if err := add(k, en.term, epoch, en.low, 1); err != nil {
					return nil, err
				}
			}
			continue
		}
		if len(v) < 2 || len(v)%2 != 0 {
			return nil, fmt.Errorf("search index: key %q: a list of %d bytes", k, len(v))
		}
		if err := add(k, k[n:], epoch, postingLow(v, 0), len(v)/2); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// partName is the value an index part holds: the part itself, or for a
// hashed one the queue of job seq, which has it.
func (t *Tx) partName(part []byte, seq uint64) (string, error) {
	if part[0] != hashedPart {
		return string(part[1:]), nil
	}
	id := t.tx.Bucket(bucketSeq).Get(putUint(seq))
	if id == nil {
		return "", fmt.Errorf("job of seq %d: %w", seq, ErrNotFound)
	}
	h, err := t.JobHead(string(id))
	if err != nil {
		return "", err
	}
	return h.Queue, nil
}
