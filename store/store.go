// Package store owns Workron's bbolt state file: its buckets, its secondary
// indexes and one read or write transaction per call. It is pure data: it reads
// no clock, draws no random numbers and knows nothing of Raft; every write is
// stamped with the Raft index its caller passes in.
//
// Job records are binary (record.go gives the layout); the few other records
// are JSON. A state file or snapshot of format 1, where job records were
// JSON too, is still read: Open rewrites its job records in binary.
package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/internal/flushpace"
)

// Errors returned by the store.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrClosed means the state file was closed: nothing was written.
	ErrClosed = errors.New("store: closed")
)

var (
	bucketJobs     = []byte("jobs")    // id -> Job
	bucketSeq      = []byte("seq")     // seq(8) -> id
	bucketStatus   = []byte("status")  // status 0x00 seq(8) -> id
	bucketIdem     = []byte("idem")    // idempotency key -> until(8) id
	bucketWorkers  = []byte("workers") // id -> Worker
	bucketNodes    = []byte("nodes")   // id -> Node
	bucketMeta     = []byte("meta")    // name -> value
	bucketQueues   = []byte("queues")  // paused queue name -> 1
	bucketExpiry   = []byte("expiry")  // expire_at(8) seq(8) -> id of a finished job
	bucketDeps     = []byte("deps")    // dependency edges; see deps.go
	allBuckets     = [][]byte{bucketJobs, bucketSeq, bucketStatus, bucketIdem, bucketWorkers, bucketNodes, bucketMeta, bucketQueues, bucketExpiry, bucketSchedules, bucketGangs, bucketCheckpoints, bucketDeps, bucketQueueLimits, bucketTokens, bucketFlow, bucketCascades, bucketIndex, bucketBulk, bucketSteps, bucketEvents, bucketWaits, bucketParks, bucketHeads}
	keyApplied     = []byte("applied_index")
	keyNextSeq     = []byte("next_seq")
	keyLastNow     = []byte("last_now")
	keyLastLease   = []byte("last_lease")
	keyFormat      = []byte("format")
	keyUpgrading   = []byte("upgrading") // present while Open rewrites older formats' job records
	currentFormat  = uint64(3)           // 2: job records binary (record.go); 3: dependency edges in bucketDeps, V2 job records
	oldestFormat   = uint64(1)           // 1: every record JSON; Open rewrites its job records
	defaultMmapLen = 1 << 30             // the mapping on 32-bit machines; see mmap.go
)

// Options tune how the state file is opened.
type Options struct {
	// NoSync skips fsync on commit. The Raft log is the durable record, so a
	// node that lost unsynced state replays it; see raftnode. Defaults to false.
	NoSync bool
	// InitialMmapSize is the virtual size mapped up front, so that a
	// snapshot's long read never blocks a commit on a remap (mmap.go).
	// Defaults to mmapLen: at least 64 GiB, or four times the file, on
	// 64-bit machines.
	InitialMmapSize int
}

// Store is an open state file.
type Store struct {
	path string
	opts Options
	db   *bolt.DB
	refs *snapshotRefs // the snapshots reading db
	// noIndex keeps no search index (index.go): only benchmarks set it, to
	// measure what the index costs; lists and counts then scan.
	noIndex bool
	ix      *indexPending // kept between write transactions for its room

}

// snapshotRefs counts the snapshots open on one bolt.DB, so that Restore
// can replace the file while a snapshot still reads the old one: the last
// snapshot to close closes the old DB. bolt.DB.Close waits for every read
// transaction to end, and Raft may hold a snapshot (a read transaction)
// while it waits for the goroutine that called Restore: closing at once
// would never return.
type snapshotRefs struct {
	file    os.FileInfo // the file the DB opened, for NewPageCheck
	mu      sync.Mutex
	open    int
	retired bool // replaced by a restore: close when open reaches 0
}

// Open opens (creating if needed) the state file at path. A file of an older
// state format has its job records rewritten first (upgrade.go), once: those
// of format 1 in binary, and the dependents lists of formats 1 and 2 moved
// into the dependency bucket; about as long as every start used to take.
// A file whose live jobs' heads are not current (heads.go) has them built,
// about as long as a start took before they were kept.
func Open(path string, opts Options) (*Store, error) {
	s := &Store{path: path, opts: opts, noIndex: searchIndexOff}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) open() error {
	mapped := s.opts.InitialMmapSize
	if mapped == 0 {
		mapped = mmapLen(s.path) // again after a restore: the new file's size
	}
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{
		Timeout:         5 * time.Second,
		NoSync:          s.opts.NoSync,
		NoFreelistSync:  false, // written: see docs/DESIGN.md, "A start"
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: mapped,
	})
	if err != nil {
		return fmt.Errorf("open state %s: %w", s.path, err)
	}
	var upgrade bool
	err = db.Update(func(tx *bolt.Tx) error {
		headsMissing := tx.Bucket(bucketHeads) == nil
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if headsMissing { // a file of a release before it, or one that lost it
			if err := tx.Bucket(bucketMeta).Delete(keyHeadsApplied); err != nil {
				return err
			}
		}
		var err error
		upgrade, err = stampFormat(tx.Bucket(bucketMeta))
		return err
	})
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("init state %s: %w", s.path, err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("open state %s: %w", s.path, err)
	}
	s.db, s.refs = db, &snapshotRefs{file: fi}
	if upgrade {
		if err := s.rewriteJobs(rewriteBatch); err != nil {
			_ = db.Close()
			s.db = nil
			return fmt.Errorf("upgrade state %s to format %d: %w", s.path, currentFormat, err)
		}
	}
	if err := s.buildHeads(headsBatch); err != nil {
		_ = s.db.Close()
		s.db = nil
		return fmt.Errorf("open state %s: %w", s.path, err)
	}
	if err := s.buildIndex(indexBuildBatch); err != nil {
		_ = s.db.Close()
		s.db = nil
		return fmt.Errorf("open state %s: %w", s.path, err)
	}
	return nil
}

// Close closes the state file.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db, s.refs = nil, nil
	return err
}

// Sync flushes the file to disk; needed only when it was opened NoSync.
func (s *Store) Sync() error {
	if s.db == nil {
		return ErrClosed
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("sync state %s: %w", s.path, err)
	}
	return nil
}

// BytesWritten is how many bytes of pages the write transactions committed
// since the file was opened (or restored) allocated: what they cost in
// writes, measured without a clock.
func (s *Store) BytesWritten() int64 {
	st := s.db.Stats()
	return st.TxStats.GetPageAlloc()
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Update runs fn in one write transaction, committed if fn returns nil
// (with the search index's changes it gathered; see flushIndex).
// On a closed store it fails with ErrClosed.
func (s *Store) Update(fn func(tx *Tx) error) error {
	if s.db == nil {
		return ErrClosed
	}
	return s.db.Update(func(btx *bolt.Tx) error {
		// One write transaction at a time: it borrows the store's
		// pending index changes, empty, and gives them back.
		// A panic or an error rolls the transaction back: its changes
		// are dropped with it.
		t := &Tx{tx: btx, noIndex: s.noIndex, ix: s.ix}
		defer func() { t.ix.reset(); s.ix = t.ix }()
		if err := fn(t); err != nil {
			return err
		}
		return t.flushIndex()
	})
}

// View runs fn in one read transaction.
func (s *Store) View(fn func(tx *Tx) error) error {
	return s.db.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx, noIndex: s.noIndex}) })
}

// Snapshot is a consistent read-only view of the whole file, held open until
// Close. Take it where consistency matters, write it out anywhere. It
// outlives a Restore: it goes on reading the state it was taken of.
type Snapshot struct {
	tx   *bolt.Tx
	db   *bolt.DB
	refs *snapshotRefs
}

// Snapshot starts a read transaction covering the whole state.
func (s *Store) Snapshot() (*Snapshot, error) {
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("begin snapshot: %w", err)
	}
	s.refs.mu.Lock()
	s.refs.open++
	s.refs.mu.Unlock()
	return &Snapshot{tx: tx, db: s.db, refs: s.refs}, nil
}

// WriteTo writes the state file's bytes as of the snapshot.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	n, err := sn.tx.WriteTo(w)
	if err != nil {
		return n, fmt.Errorf("write snapshot: %w", err)
	}
	return n, nil
}

// Size is the snapshot's size in bytes.
func (sn *Snapshot) Size() int64 { return sn.tx.Size() }

// Close ends the snapshot's read transaction, and closes the state file it
// read if a Restore has replaced it and no other snapshot reads it. Safe to
// call twice.
func (sn *Snapshot) Close() {
	if sn.tx == nil {
		return
	}
	_ = sn.tx.Rollback()
	sn.tx = nil
	sn.refs.mu.Lock()
	sn.refs.open--
	last := sn.refs.retired && sn.refs.open == 0
	sn.refs.mu.Unlock()
	if last {
		_ = sn.db.Close() // nothing reads it any more; a file since replaced
	}
}

// retire gives up the open DB for a restored one: it is closed now if no
// snapshot reads it, else by the last snapshot's Close.
func (s *Store) retire() error {
	db, refs := s.db, s.refs
	s.db, s.refs = nil, nil
	refs.mu.Lock()
	refs.retired = true
	now := refs.open == 0
	refs.mu.Unlock()
	if !now {
		return nil
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close old state: %w", err)
	}
	return nil
}

// Restore replaces the whole state with the bolt file read from r. The
// caller must ensure no Update or View runs; a Snapshot may be open, and
// goes on reading the old state. Every page of the new file is checked
// (VerifyPages) before the old state is given up: on error the old state
// stays.
func (s *Store) Restore(r io.Reader) error { return s.restore(r, VerifyPages) }

// RestoreChecked is Restore for a stream that checks its own bytes whole:
// one that fails, rather than end, unless a checksum of every byte it gave
// matched (raftnode's snapshot reader, over a snapshot's CRC). A cut-off
// or damaged stream then fails the copy, and the new file is checked only
// as far as opening it reads first (QuickCheck): VerifyPages would read
// all of it again, 2-4 s a million jobs here. What the checksum cannot
// show is damage in the file it was taken of; that is the page checks'
// of the file it came from, and of this one once installed (raftnode
// checks its pages in the background: Node.restoreChecked).
func (s *Store) RestoreChecked(r io.Reader) error {
	return s.restore(r, func(path string) (Info, error) { return Info{}, QuickCheck(path) })
}

func (s *Store) restore(r io.Reader, check func(path string) (Info, error)) error {
	tmp := s.path + ".restore"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("restore: create %s: %w", tmp, err)
	}
	_, err = io.Copy(&syncingWriter{f: f, pace: flushpace.New(f, restoreSyncBytes)}, r)
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("restore: copy: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("restore: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: close: %w", err)
	}
	// Check the new file before giving up the old one: a cut-off stream, a
	// corrupted one or one of another format would otherwise fail (or crash
	// bbolt) only after the old state is gone. VerifyPages (or QuickCheck
	// after a stream that checked itself, RestoreChecked), not Verify: a
	// follower installs the leader's snapshots here, and the records of a
	// million jobs take seconds to decode; a user's backup was checked whole
	// before it reached Raft (raftnode.Node.Restore).
	if _, err := check(tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	if err := s.retire(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("restore: rename: %w", err)
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return s.open()
}

// restoreSyncBytes is how many bytes Restore writes between flushes
// (flushpace). One fsync of a whole snapshot (tens of MB) at the end
// would hold every fsync of the Raft log on the same disk behind it for
// tens of milliseconds; raftnode's snapshot sink flushes as it writes for
// the same reason (raftnode/snapstore.go).
const restoreSyncBytes = 4 << 20

// syncingWriter writes to f and flushes it every restoreSyncBytes.
type syncingWriter struct {
	f    *os.File
	pace *flushpace.Pacer
}

func (w *syncingWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	if err == nil {
		err = w.pace.Wrote(n)
	}
	return n, err
}

// PrepareRestore readies a verified copy of a backup to be restored into
// a running cluster: its member addresses become nodes, the cluster's own
// (the backup's are another cluster's, or older). Everything else stays,
// the applied index included: the restore puts the cluster's log past it.
func PrepareRestore(path string, nodes []*Node) error {
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	err = s.Update(func(t *Tx) error {
		old, err := t.Nodes()
		if err != nil {
			return err
		}
		for _, n := range old {
			if err := t.DeleteNode(n.ID); err != nil {
				return err
			}
		}
		for _, n := range nodes {
			if err := t.PutNode(n); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("prepare restore of %s: %w", path, err)
	}
	return nil
}
