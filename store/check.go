package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
)

// Check verifies that the indexes agree with the job records: every job has
// one seq entry and one status entry naming it, every live job and no other
// has its record's head in the heads bucket (heads.go) when it is current,
// the search index holds exactly the jobs' keys (index.go) when it is
// current, no index entry points nowhere, and every dependency edge joins
// two existing jobs. Tests call it at cleanup.
func (s *Store) Check() error {
	return s.View(func(t *Tx) error {
		var jobs int
		return checkIndexes(t, &jobs)
	})
}

// checkIndexes decodes every job record, checks the indexes and the
// dependency edges against them and counts them in jobs.
func checkIndexes(t *Tx, jobs *int) error {
	expiring, live := 0, 0
	heads := t.headsKept()
	if heads && t.tx.Bucket(bucketHeads) == nil {
		return fmt.Errorf("heads bucket missing, though meta says it is whole at applied index %d", t.Applied())
	}
	search := newIndexChecker(t)
	err := t.tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
		*jobs++
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
		if heads {
			if j.Status.Live() {
				live++
			}
			if err := t.checkHead(j, v); err != nil {
				return err
			}
		}
		return search.job(j)
	})
	if err != nil {
		return err
	}
	if n := t.tx.Bucket(bucketExpiry).Stats().KeyN; n != expiring {
		return fmt.Errorf("expiry index has %d entries for %d expiring jobs", n, expiring)
	}
	if n := t.tx.Bucket(bucketSeq).Stats().KeyN; n != *jobs {
		return fmt.Errorf("seq index has %d entries for %d jobs", n, *jobs)
	}
	if n := t.tx.Bucket(bucketStatus).Stats().KeyN; n != *jobs {
		return fmt.Errorf("status index has %d entries for %d jobs", n, *jobs)
	}
	if n := t.tx.Bucket(bucketHeads); heads && n.Stats().KeyN != live {
		return fmt.Errorf("heads bucket has %d entries for %d live jobs", n.Stats().KeyN, live)
	}
	if err := search.finish(); err != nil {
		return err
	}
	if err := t.checkEdges(); err != nil {
		return err
	}
	if err := t.checkEvents(); err != nil {
		return err
	}
	return t.checkCascades()
}

// Digest is a hash of every bucket's keys and values, in key order. Two
// nodes of one version that applied the same log to the same index have
// equal digests. It hashes the records' bytes as stored: Open rewrites the
// JSON job records of state format 1 in binary before anything reads the
// store, so no two nodes of this version hold one job in two encodings. A
// node of an older version (JSON records, format 1) disagrees with them
// even when their jobs are the same: compare digests within one version.
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
			err := t.tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
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
