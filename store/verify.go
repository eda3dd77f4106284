package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged means a file is not a whole, consistent state file this binary
// reads: empty, cut off, corrupted, of another format, or not a Workron
// state file at all. Verify wraps it with what it found.
var ErrDamaged = errors.New("store: not a whole Workron state file")

// minFileSize is the smallest file bbolt can have written: two meta pages,
// a freelist page and a root leaf, of its smallest page size (1 KiB).
const minFileSize = 4 * 1024

// maxVerifyErrors is how many of bbolt's consistency errors Verify reports.
const maxVerifyErrors = 5

// Info describes a state file Verify accepted.
type Info struct {
	Size      int64  // bytes
	Format    uint64 // state format (see readableFormat)
	Applied   uint64 // Raft index of the last entry applied to it
	LastLease uint64 // highest fencing token it handed out
	Jobs      int
}

// Verify checks the state file at path completely, changing nothing: its
// size against bbolt's own high-water mark, bbolt's page consistency check,
// the state format, every record's decoding and the job indexes. A file
// that fails any of these gives an error wrapping ErrDamaged, saying what is
// wrong (not naming the file: the caller knows it); other errors (the file
// cannot be read) are returned as they are.
// It is safe to call on any file: it never opens one read-write, and it
// turns what bbolt does on corrupt input (panics, and faults on pages past
// the end of a cut-off file) into ErrDamaged; see verifyOpen.
func Verify(path string) (Info, error) { return verify(path, true) }

// VerifyPages is Verify without bbolt's consistency check and without
// decoding the records: the size, the format, and a read of every page in
// use, which is what bbolt needs to open and read the file without
// crashing. It takes about a twentieth of Verify's time (40 ms for 200,000
// jobs, against 1.1 s), so a node runs it at every start; Info.Jobs stays 0.
func VerifyPages(path string) (Info, error) { return verify(path, false) }

func verify(path string, full bool) (Info, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Info{}, fmt.Errorf("verify: %w", err)
	}
	info := Info{Size: fi.Size()}
	switch {
	case !fi.Mode().IsRegular():
		return info, fmt.Errorf("%w: not a regular file", ErrDamaged)
	case fi.Size() == 0:
		return info, fmt.Errorf("%w: the file is empty", ErrDamaged)
	case fi.Size() < minFileSize:
		return info, fmt.Errorf("%w: %d bytes is too short for a state file", ErrDamaged, fi.Size())
	}
	return info, verifyGuarded(path, &info, full)
}

// verifyGuarded runs the checks that read the file through bbolt, in
// guarded.
func verifyGuarded(path string, info *Info, full bool) error {
	return guarded(func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			if errors.Is(err, berrors.ErrTimeout) {
				return fmt.Errorf("verify: open %s: %w (is a server running on it?)", path, err)
			}
			return fmt.Errorf("%w: %w", ErrDamaged, err)
		}
		defer db.Close()
		return db.View(func(tx *bolt.Tx) error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			freelist, ok := metaFreelist(f, db.Info().PageSize, uint64(tx.ID()))
			if !ok {
				return fmt.Errorf("%w: no meta page of its transaction %d", ErrDamaged, tx.ID())
			}
			if err := checkPages(f, tx, db.Info().PageSize, freelist, info, nil); err != nil || !full {
				return err
			}
			if err := verifyRecords(&Tx{tx: tx}, info); err != nil {
				return fmt.Errorf("%w: %w", ErrDamaged, err)
			}
			var errs []error
			for err := range tx.Check() {
				if len(errs) < maxVerifyErrors {
					errs = append(errs, err)
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("%w: bbolt consistency check: %w", ErrDamaged, errors.Join(errs...))
			}
			return nil
		})
	})
}

// guarded runs fn, which reads a file through bbolt. bbolt trusts its
// file: a corrupted page makes it panic (slice bounds, "invalid page
// type"), and reading a page past the end of a cut-off file faults
// (SIGBUS) on the memory map. Both are recovered here, for this goroutine
// only (debug.SetPanicOnFault turns the fault into a panic), and reported
// as damage. This is the one place Workron recovers a panic: the file is
// untrusted input, and the check exists to refuse it.
func guarded(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt failed reading it: %v", ErrDamaged, r)
		}
	}()
	return fn()
}

// checkPages is VerifyPages' check of the file f as of tx (of page size
// pageSize): its size against the high-water mark, before any page past
// the meta pages is read (so the fault guarded recovers should not happen
// at all), every page tree walked without bbolt, every key read through
// bbolt, the freelist page (freelist, from metaFreelist) against them, and
// the format. It sets info's Format, Applied and LastLease.
// stop, if closed, ends it early with ErrCheckStopped.
func checkPages(f io.ReaderAt, tx *bolt.Tx, pageSize int, freelist uint64, info *Info, stop <-chan struct{}) error {
	if need := tx.Size(); info.Size < need {
		return fmt.Errorf("%w: truncated: %d of its %d bytes", ErrDamaged, info.Size, need)
	}
	// Walk the page trees without bbolt first (walkPages): a cycle among
	// pages sends bbolt's cursor down forever. Then walk every page
	// through bbolt here: tx.Check has bbolt compute the free pages in a
	// goroutine of its own, where a panic on a corrupt page cannot be
	// recovered. Once this walk has read every reachable page without
	// panicking, that one reads only pages known to be sound.
	root := uint64(tx.Cursor().Bucket().Root())
	if err := walkPages(f, pageSize, uint64(tx.Size())/uint64(pageSize), root, freelist, stop); err != nil {
		return damaged(err)
	}
	if err := walkBuckets(tx.Cursor(), 0, &stopper{stop: stop}); err != nil {
		return damaged(err)
	}
	return verifyFormat(tx, info)
}

// damaged wraps a fault the page walk found as ErrDamaged; a stopped walk
// stays ErrCheckStopped.
func damaged(err error) error {
	if errors.Is(err, ErrCheckStopped) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrDamaged, err)
}

// maxBucketDepth bounds walkBuckets' recursion: Workron's buckets are not
// nested, so anything deep is corruption.
const maxBucketDepth = 8

// walkBuckets reads every key of every bucket under c, recursively, so that
// every reachable page is read (and checked by bbolt as it is).
func walkBuckets(c *bolt.Cursor, depth int, s *stopper) error {
	if depth > maxBucketDepth {
		return errors.New("buckets nested too deep")
	}
	b := c.Bucket()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if s.stopped() {
			return ErrCheckStopped
		}
		if v != nil {
			continue
		}
		child := b.Bucket(k)
		if child == nil {
			return fmt.Errorf("key %q: neither a value nor a bucket", k)
		}
		if err := walkBuckets(child.Cursor(), depth+1, s); err != nil {
			return err
		}
	}
	return nil
}

// verifyFormat reads the meta bucket: a Workron state file has one, with a
// state format this binary reads.
func verifyFormat(tx *bolt.Tx, info *Info) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil || meta.Get(keyFormat) == nil {
		return fmt.Errorf("%w: a bbolt file, but not a Workron state file (no format recorded)", ErrDamaged)
	}
	info.Format = getUint(meta.Get(keyFormat))
	if !readableFormat(info.Format) {
		return fmt.Errorf("%w: state format %d, this binary reads %d to %d", ErrDamaged, info.Format, oldestFormat, currentFormat)
	}
	info.Applied = getUint(meta.Get(keyApplied))
	info.LastLease = getUint(meta.Get(keyLastLease))
	return nil
}

// verifyRecords decodes every record and checks the job indexes. A bucket
// missing from a file of an older format counts as empty (Open creates it).
func verifyRecords(t *Tx, info *Info) error {
	has := func(b []byte) bool { return t.tx.Bucket(b) != nil }
	if has(bucketJobs) {
		if !has(bucketSeq) || !has(bucketStatus) || !has(bucketExpiry) {
			return errors.New("job indexes missing")
		}
		if err := checkIndexes(t, &info.Jobs); err != nil {
			return err
		}
	}
	each := []struct {
		bucket []byte
		walk   func() error
	}{
		{bucketWorkers, func() error { return t.ForEachWorker(func(*Worker) error { return nil }) }},
		{bucketNodes, func() error { _, err := t.Nodes(); return err }},
		{bucketSchedules, func() error { return t.ForEachSchedule(func(*Schedule) error { return nil }) }},
		{bucketGangs, func() error { return t.ForEachGang(func(*Gang) error { return nil }) }},
		{bucketIdem, func() error { return minValues(t, bucketIdem, 8) }},
		{bucketCheckpoints, func() error { return minValues(t, bucketCheckpoints, 8) }},
		{bucketEvents, t.checkEvents},
		{bucketParks, t.checkParks},
	}
	for _, e := range each {
		if has(e.bucket) {
			if err := e.walk(); err != nil {
				return err
			}
		}
	}
	return nil
}

// minValues checks that every value in the bucket has at least n bytes.
func minValues(t *Tx, bucket []byte, n int) error {
	return t.tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		if len(v) < n {
			return fmt.Errorf("%s %q: %d-byte record", bucket, k, len(v))
		}
		return nil
	})
}
