package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
)

// Check verifies that the indexes agree with the job records: every job has
// one seq entry and one status entry naming it, and no index entry points
// nowhere. Tests call it at cleanup.
func (s *Store) Check() error {
	return s.View(func(t *Tx) error {
		jobs, expiring := 0, 0
		err := t.tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			jobs++
			j := new(Job)
			if err := decodeJob(v, j); err != nil {
				return fmt.Errorf("job %s: %w", k, err)
			}
			if j.ExpireAt != 0 {
				expiring++
				if got := t.tx.Bucket(bucketExpiry).Get(expiryKey(j.ExpireAt, j.Seq)); string(got) != j.ID {
					return fmt.Errorf("job %s: expiry index names %q", j.ID, got)
				}
			}
			if got := t.tx.Bucket(bucketSeq).Get(putUint(j.Seq)); string(got) != j.ID {
				return fmt.Errorf("job %s: seq index %d names %q", j.ID, j.Seq, got)
			}
			if got := t.tx.Bucket(bucketStatus).Get(statusKey(j.Status, j.Seq)); string(got) != j.ID {
				return fmt.Errorf("job %s: status index %s names %q", j.ID, j.Status, got)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n := t.tx.Bucket(bucketExpiry).Stats().KeyN; n != expiring {
			return fmt.Errorf("expiry index has %d entries for %d expiring jobs", n, expiring)
		}
		if n := t.tx.Bucket(bucketSeq).Stats().KeyN; n != jobs {
			return fmt.Errorf("seq index has %d entries for %d jobs", n, jobs)
		}
		if n := t.tx.Bucket(bucketStatus).Stats().KeyN; n != jobs {
			return fmt.Errorf("status index has %d entries for %d jobs", n, jobs)
		}
		return nil
	})
}

// Digest is a hash of every bucket's keys and values, in key order. Two
// nodes that applied the same log to the same index have equal digests,
// whichever of them still holds job records of state format 1 (JSON): those
// are hashed as the binary record they would be written as now (see
// canonicalJob).
func (s *Store) Digest() (string, error) {
	_, d, err := s.DigestAt()
	return d, err
}

// DigestAt is Digest together with the applied index recorded in the same
// read transaction, so the two always describe the same state.
func (s *Store) DigestAt() (applied uint64, digest string, err error) {
	h := sha256.New()
	err = s.View(func(t *Tx) error {
		applied = t.Applied()
		names := make([]string, 0, len(allBuckets))
		for _, b := range allBuckets {
			names = append(names, string(b))
		}
		sort.Strings(names)
		for _, name := range names {
			h.Write([]byte(name))
			h.Write([]byte{0})
			jobs := name == string(bucketJobs)
			err := t.tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				if jobs {
					var err error
					if v, err = canonicalJob(v); err != nil {
						return fmt.Errorf("job %s: %w", k, err)
					}
				}
				fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(v), v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("digest: %w", err)
	}
	return applied, hex.EncodeToString(h.Sum(nil)), nil
}

// canonicalJob is the binary form of a job record. Nodes write a job's
// record in the encoding of their version when they apply a command to it,
// so after a rolling upgrade (or a restore from a newer node's snapshot, or
// a rebuild from the log) one node may hold a job in JSON that another
// holds in binary. Both decode to the same Job (JSON keeps every field
// binary keeps, and strings that came through JSON commands are valid
// UTF-8), so hashing the binary form of each keeps their digests equal, at
// the cost of decoding only the records not yet rewritten.
func canonicalJob(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != '{' {
		return v, nil
	}
	var j Job
	if err := decodeJob(v, &j); err != nil {
		return nil, err
	}
	return appendJob(nil, &j)
}
