package raftnode

import (
	"bufio"
	"bytes"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// Open opens a snapshot for reading once, checking its checksum (the
// CRC-32C or CRC-64 its meta.json records, snapmeta.go) as it is read.
// hashicorp/raft's FileSnapshotStore.Open read the whole state file to
// check its CRC before returning it, and its reader then read it again: at
// 10,000,000 jobs two reads of 6.4 GB for a follower installing a
// snapshot, and the same for a leader sending one. The reader returned
// here gives every byte but those of its last read as it reads them, and
// those only once the checksum of the whole file matched (else
// errSnapshotCRC): so no reader, Raft's transport sending it on or the
// store restoring it, can take a damaged or cut-off file for a whole one.
// The layout is the FileSnapshotStore's (meta.json beside state.bin).
//
// The reader drops the pages it has read from the page cache behind it
// (dropBehindBytes at a time): a snapshot is read once, to send it or to
// restore it, and its pages would otherwise push out the pages the node
// reads next. A follower restoring a 10,000,000-job snapshot (8 GB) kept
// the snapshot's pages and lost those of the state file it had just
// written, so the rebuild of the indexes after the copy read them again
// at random: 12-75 s instead of 6 s (docs/performance-store.md).
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, err := readSnapshotMeta(filepath.Join(s.dir, id, "meta.json"))
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	sum, want, err := meta.checksum()
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	f, err := os.Open(filepath.Join(s.dir, id, "state.bin"))
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	if fi.Size() != meta.Size {
		f.Close()
		return nil, nil, fmt.Errorf("open snapshot %s: state file holds %d bytes, its meta says %d", id, fi.Size(), meta.Size)
	}
	cs := &checkedSnapshot{f: f, r: bufio.NewReaderSize(f, 1<<20), hash: sum, want: want, left: meta.Size}
	if meta.Size == 0 {
		cs.verify()
	}
	return &meta.SnapshotMeta, cs, nil
}

// checkedSnapshot reads a snapshot's state file, checking its checksum as
// it goes; see snapshotStore.Open.
type checkedSnapshot struct {
	f    *os.File
	r    *bufio.Reader
	hash hash.Hash
	want []byte
	left int64 // bytes not yet given
	err  error // sticky: the checksum did not match, or the file ended early
	// given: bytes given from the file's start; dropped: how many of
	// them had been given at the last drop of their pages (dropCached).
	given, dropped int64
}

// dropBehindBytes is how many bytes a snapshot reader gives between
// drops of their pages from the page cache. A var so that tests can lower it.
var dropBehindBytes int64 = 32 << 20

func (c *checkedSnapshot) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.hash.Write(p[:n])
	c.left -= int64(n)
	c.given += int64(n)
	if c.given-c.dropped >= dropBehindBytes || c.left == 0 {
		// From the start each time, to the end at the last: the cache
		// holds large folios, and a range drops only those it covers.
		end := c.given
		if c.left == 0 {
			end = 0 // the whole file
		}
		dropCached(c.f, 0, end)
		c.dropped = c.given
	}
	switch {
	case c.left == 0:
		// The last bytes: given only if the whole file matched.
		if c.verify(); c.err != nil {
			return 0, c.err
		}
		return n, nil
	case err == io.EOF:
		c.err = fmt.Errorf("%w: the state file ended %d bytes early", errSnapshotCRC, c.left)
		return 0, c.err
	case err != nil:
		c.err = err
	}
	return n, err
}

// verify checks the checksum of everything read, setting c.err on a mismatch.
func (c *checkedSnapshot) verify() {
	if got := c.hash.Sum(nil); !bytes.Equal(got, c.want) {
		c.err = fmt.Errorf("%w: computed %x, meta.json has %x", errSnapshotCRC, got, c.want)
	}
}

func (c *checkedSnapshot) Close() error { return c.f.Close() }
