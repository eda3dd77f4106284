package raftnode

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/pagecache"
	"github.com/workron/workron/store"
)

// BenchmarkJoin times the passes over the state file of a node that joins
// a cluster and is sent the leader's snapshot of it, each separately:
//
//   - receive: the snapshot written into this node's snapshot store (the
//     sink Raft's InstallSnapshot writes into), from the state file named by
//     WORKRON_JOIN_PATH (filled by BenchmarkStart with WORKRON_START_PATH);
//   - open: the snapshot store's Open, as Raft's FSM goroutine opens it;
//   - restore: the FSM's restore of it (Raft's path, fsm.FSM.RestoreChecked): the copy
//     into the state file, its check and the rebuild of the indexes;
//   - and then, on the restored file, each again alone: store.VerifyPages,
//     fsm.New with the file in the page cache, and fsm.New with the file
//     dropped from it first (posix_fadvise DONTNEED), a start's cold case.
//
// Skipped unless WORKRON_JOIN_PATH is set. WORKRON_JOIN_DIR is where the
// data directory goes (a temporary directory unless set); it is removed
// after each iteration.
func BenchmarkJoin(b *testing.B) {
	src := os.Getenv("WORKRON_JOIN_PATH")
	if src == "" {
		b.Skip("WORKRON_JOIN_PATH names no state file")
	}
	parent := os.Getenv("WORKRON_JOIN_DIR")
	if parent == "" {
		parent = b.TempDir()
	}
	var sum [6]time.Duration
	for b.Loop() {
		dir, err := os.MkdirTemp(parent, "join-")
		if err != nil {
			b.Fatal(err)
		}
		took := joinOnce(b, src, dir)
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		for i := range sum {
			sum[i] += took[i]
		}
		b.Logf("receive %v, open %v, restore %v; alone: VerifyPages %v, New warm %v, New cold %v",
			took[0].Round(time.Millisecond), took[1].Round(time.Millisecond), took[2].Round(time.Millisecond),
			took[3].Round(time.Millisecond), took[4].Round(time.Millisecond), took[5].Round(time.Millisecond))
	}
	for i, name := range []string{"receive-ms", "open-ms", "restore-ms", "verify-ms", "new-warm-ms", "new-cold-ms"} {
		b.ReportMetric(float64(sum[i].Milliseconds())/float64(b.N), name)
	}
}

// joinOnce runs one join's passes in dir; see BenchmarkJoin.
func joinOnce(b *testing.B, src, dir string) [6]time.Duration {
	var took [6]time.Duration
	step := func(i int, fn func() error) {
		b.Helper()
		t := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		took[i] = time.Since(t)
	}
	snaps, err := newSnapshotStore(dir, 2, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	_, trans := raft.NewInmemTransport(raft.NewInmemAddr())
	var id string
	step(0, func() error {
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		sink, err := snaps.Create(raft.SnapshotVersionMax, 100, 2, raft.Configuration{}, 1, trans)
		if err != nil {
			return err
		}
		id = sink.ID()
		if _, err := io.Copy(sink, struct{ io.Reader }{in}); err != nil {
			_ = sink.Cancel()
			return err
		}
		return sink.Close()
	})
	var rc io.ReadCloser
	step(1, func() error { _, rc, err = snaps.Open(id); return err })
	path := filepath.Join(dir, "state.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	f, err := fsm.New(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	tr := &timedReader{ReadCloser: rc}
	step(2, func() error { return f.RestoreChecked(tr) })
	b.Logf("restore: read (and on this branch the CRC) %v; the copy ended after %v; then %v (sync, check, open, rebuild)",
		tr.in.Round(time.Millisecond), tr.ended.Sub(tr.first).Round(time.Millisecond), took[2]-tr.ended.Sub(tr.first))
	step(4, func() error { _, err := fsm.New(st, nil); return err })
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	step(3, func() error { _, err := store.VerifyPages(path); return err })
	pagecache.Drop(b, path)
	st, err = store.Open(path, store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	step(5, func() error { _, err := fsm.New(st, nil); return err })
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if os.Getenv("WORKRON_JOIN_READAHEAD") != "" {
		newAfterReadAhead(b, path)
	}
	return took
}

// newAfterReadAhead logs how long fsm.New takes on the file dropped from
// the page cache when the whole file is read ahead first
// (posix_fadvise WILLNEED, in file order), the remedy docs/performance.md
// weighs for a cold start.
func newAfterReadAhead(b *testing.B, path string) {
	pagecache.Drop(b, path)
	t := time.Now()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_WILLNEED); err != nil {
		b.Fatal(err)
	}
	f.Close()
	advised := time.Since(t)
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fsm.New(st, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("New cold after WILLNEED of the whole file: %v (the advice returned after %v)", time.Since(t).Round(time.Millisecond), advised.Round(time.Millisecond))
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
}
