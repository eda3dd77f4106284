package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/workron/workron/internal/testkit/pagecache"
)

// readAheadStore fills a store of n jobs, inserted in a shuffled order
// (so the jobs bucket's leaves are not in file order), with ids long
// enough that the bucket's tree has several branch levels at a few
// thousand jobs. Job i is pending when live(i), else done.
func readAheadStore(t *testing.T, n int, live func(i int) bool) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := rand.New(rand.NewPCG(1, 2))
	order := r.Perm(n)
	pad := strings.Repeat("x", 150)
	for at := 0; at < n; at += 500 {
		err := s.Update(func(tx *Tx) error {
			for _, i := range order[at:min(at+500, n)] {
				seq, err := tx.NextSeq()
				if err != nil {
					return err
				}
				j := &Job{ID: fmt.Sprintf("job-%06d-%s", i, pad), Seq: seq, Queue: "q", Status: StatusDone, Command: "/bin/true " + pad}
				if live(i) {
					j.Status = StatusPending
				}
				if err := tx.InsertJob(j, seq); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// leafOf is the leaf page that holds key in the tree at root of file,
// found as bbolt's Cursor.Seek finds it (a binary search of each branch
// page: the last element whose key is not above key), independently of
// leavesHolding's merge; it fails the test if that leaf lacks the key.
func leafOf(t *testing.T, file []byte, pageSize int, root uint64, key []byte) uint64 {
	t.Helper()
	page := func(id uint64) []byte { return file[int(id)*pageSize:] }
	elemKey := func(p []byte, i int, leaf bool) []byte {
		e := pageHeaderSize + i*pageElementSize
		if leaf {
			pos, ksize := int(le.Uint32(p[e+4:])), int(le.Uint32(p[e+8:]))
			return p[e+pos : e+pos+ksize]
		}
		pos, ksize := int(le.Uint32(p[e:])), int(le.Uint32(p[e+4:]))
		return p[e+pos : e+pos+ksize]
	}
	for id := root; ; {
		p := page(id)
		n := int(le.Uint16(p[10:]))
		if le.Uint16(p[8:]) == leafPage {
			for i := range n {
				if bytes.Equal(elemKey(p, i, true), key) {
					return id
				}
			}
			t.Fatalf("leaf %d does not hold key %.12q", id, key)
		}
		i := sort.Search(n, func(i int) bool { return bytes.Compare(elemKey(p, i, false), key) >= 0 })
		if i == n || !bytes.Equal(elemKey(p, i, false), key) {
			i = max(i-1, 0)
		}
		id = le.Uint64(p[pageHeaderSize+i*pageElementSize+8:])
	}
}

func TestLeavesHoldingFindsExactlyTheLeavesOfTheKeys(t *testing.T) {
	const n = 3000
	cases := map[string]func(i int) bool{
		"every seventh":        func(i int) bool { return i%7 == 3 },
		"a run and both ends":  func(i int) bool { return i == 0 || i == n-1 || (i >= 1200 && i < 1500) },
		"all":                  func(int) bool { return true },
		"one":                  func(i int) bool { return i == 2222 },
		"the last of the tree": func(i int) bool { return i >= n-40 },
	}
	for name, live := range cases {
		t.Run(name, func(t *testing.T) {
			s := readAheadStore(t, n, live)
			file, err := os.ReadFile(s.path)
			if err != nil {
				t.Fatal(err)
			}
			err = s.View(func(tx *Tx) error {
				keys := pendingKeys(tx)
				b := tx.tx.Bucket(bucketJobs)
				if st := b.Stats(); st.Depth < 4 {
					t.Fatalf("the jobs bucket's tree is %d deep: the test needs two branch levels and more", st.Depth)
				}
				root, pageSize := uint64(b.Root()), s.db.Info().PageSize
				want := map[uint64]bool{}
				for _, k := range keys {
					want[leafOf(t, file, pageSize, root, k)] = true
				}
				f, err := os.Open(s.path)
				if err != nil {
					return err
				}
				defer f.Close()
				w := &pageWalker{f: f, pageSize: pageSize, high: uint64(tx.tx.Size()) / uint64(pageSize)}
				w.seen = make([]uint64, (w.high+63)/64)
				var branches []uint64
				got, err := leavesHolding(w, keyTree{root: root, keys: keys}, func([]uint64) error { return nil }, &branches)
				if err != nil {
					return err
				}
				if !slices.IsSorted(got) {
					t.Errorf("leaves not in ascending order: %v", got)
				}
				if !slices.Equal(got, slices.Sorted(mapKeys(want))) {
					t.Errorf("leaves found %v, want %v", got, slices.Sorted(mapKeys(want)))
				}
				for _, id := range got {
					if info, err := tx.tx.Page(int(id)); err != nil || info == nil || info.Type != "leaf" {
						t.Errorf("page %d found is not a leaf to bbolt: %+v, %v", id, info, err)
					}
				}
				if len(keys) == n && len(got) != b.Stats().LeafPageN {
					t.Errorf("all keys: %d leaves found, bbolt counts %d", len(got), b.Stats().LeafPageN)
				}
				if ra, err := tx.readAheadJobs(keys); err != nil || !ra.Cached || ra.Leaves != len(want) || ra.Runs != 0 || ra.Bytes != 0 ||
					ra.MapErr != nil || ra.Mapped < int64((len(want)+len(branches))*pageSize) {
					t.Errorf("readAheadJobs of a file in the page cache = %+v, %v; want Cached, nothing advised, %d leaves and %d branches mapped",
						ra, err, len(want), len(branches))
				}
				pagecache.Drop(t, s.path)
				ra, err := tx.readAheadJobs(keys)
				if err != nil || ra.Cached || ra.Leaves != len(want) || ra.Branches != len(branches) || ra.Runs == 0 || ra.Bytes < int64(len(want)*pageSize) {
					t.Errorf("readAheadJobs = %+v, %v; want %d leaves, %d branches, their bytes", ra, err, len(want), branches)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLeavesHoldingFindsTheLeavesOfRanges: ranges of keys (here a
// status's entries in the status index; ReadAheadStart's are the whole
// heads bucket and the search index's counts) find every leaf holding a key of
// theirs, and at most one more at each end (a leaf whose range the
// range's bound falls in, without a key of it: bbolt's Seek reads it too).
func TestLeavesHoldingFindsTheLeavesOfRanges(t *testing.T) {
	const n = 3000
	s := readAheadStore(t, n, func(i int) bool { return i%3 == 0 || (i > 1000 && i < 1400) })
	file, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(func(tx *Tx) error {
		b := tx.tx.Bucket(bucketStatus)
		if st := b.Stats(); st.Depth < 3 {
			t.Fatalf("the status bucket's tree is %d deep: the test needs a branch level and more", st.Depth)
		}
		root, pageSize := uint64(b.Root()), s.db.Info().PageSize
		for _, sts := range [][]Status{{StatusPending}, {StatusDone}, {StatusDone, StatusPending}, {StatusRunning}} {
			want := map[uint64]bool{}
			c := b.Cursor()
			for _, st := range sts {
				prefix := statusKey(st, 0)[:len(st)+1]
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
					want[leafOf(t, file, pageSize, root, k)] = true
				}
			}
			tr := keyTree{root: root}
			for _, st := range slices.Sorted(slices.Values(sts)) {
				prefix := statusKey(st, 0)[:len(st)+1]
				tr.keys, tr.ends = append(tr.keys, prefix), append(tr.ends, append([]byte(st), 1))
			}
			f, err := os.Open(s.path)
			if err != nil {
				return err
			}
			w := &pageWalker{f: f, pageSize: pageSize, high: uint64(tx.tx.Size()) / uint64(pageSize)}
			w.seen = make([]uint64, (w.high+63)/64)
			var branches []uint64
			got, err := leavesHolding(w, tr, func([]uint64) error { return nil }, &branches)
			f.Close()
			if err != nil {
				return err
			}
			extra := 0
			for _, id := range got {
				if !want[id] {
					extra++
				}
			}
			for id := range want {
				if !slices.Contains(got, id) {
					t.Errorf("%v: leaf %d of the range not found", sts, id)
				}
			}
			if extra > 2*len(sts) || len(want) < 2 && sts[0] != StatusRunning {
				t.Errorf("%v: %d leaves found, %d of them outside the ranges' %d", sts, len(got), extra, len(want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mapKeys(m map[uint64]bool) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestReadAheadFailsOnADamagedFile: a short file, a page that is not what
// its branch page says, a branch page whose elements run off it: each is
// an error of the read-ahead (which a start logs and goes on from), not a
// panic, and reading the jobs through bbolt after it is unaffected.
func TestReadAheadFailsOnADamagedFile(t *testing.T) {
	s := readAheadStore(t, 3000, func(i int) bool { return i%5 == 0 })
	err := s.View(func(tx *Tx) error {
		keys := pendingKeys(tx)
		b := tx.tx.Bucket(bucketJobs)
		root, pageSize := uint64(b.Root()), s.db.Info().PageSize
		high := uint64(tx.tx.Size()) / uint64(pageSize)
		file, err := os.ReadFile(s.path)
		if err != nil {
			return err
		}
		child := le.Uint64(file[int(root)*pageSize+pageHeaderSize+8:]) // the root's first child, a branch page
		damage := map[string]func([]byte) []byte{
			"short":         func(f []byte) []byte { return f[:int(high)*pageSize/2] },
			"wrong page id": func(f []byte) []byte { le.PutUint64(f[int(child)*pageSize:], child+1); return f },
			"elements off":  func(f []byte) []byte { le.PutUint16(f[int(child)*pageSize+10:], 0xFFF0); return f },
			"a free page":   func(f []byte) []byte { le.PutUint16(f[int(child)*pageSize+8:], freelistPage); return f },
			"element points": func(f []byte) []byte {
				le.PutUint32(f[int(child)*pageSize+pageHeaderSize+pageElementSize:], 1<<30)
				return f
			},
		}
		for name, harm := range damage {
			path := filepath.Join(t.TempDir(), "copy.db")
			if err := os.WriteFile(path, harm(slices.Clone(file)), 0o600); err != nil {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			ra, _, err := readAheadLeaves(f, pageSize, high, []keyTree{{root: root, keys: keys}}, false)
			f.Close()
			if err == nil {
				t.Errorf("%s: read ahead %+v without an error", name, ra)
			}
		}
		// Another file at the path (the store's own stays open): the
		// read-ahead fails, the records read as before.
		aside := s.path + ".aside"
		if err := os.Rename(s.path, aside); err != nil {
			return err
		}
		defer os.Rename(aside, s.path)
		if err := os.WriteFile(s.path, file[:3*pageSize], 0o600); err != nil {
			return err
		}
		pagecache.Drop(t, s.path)
		if ra, err := tx.readAheadJobs(keys); err == nil {
			t.Errorf("read ahead of a short file at the path: %+v without an error", ra)
		}
		jobs := 0
		if err := tx.forEachJobHeadIn(keys, func() { jobs++ }); err != nil || jobs != len(keys) {
			t.Errorf("the heads after the read-ahead failed: %d jobs of %d, %v", jobs, len(keys), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pendingKeys is the ids of the pending jobs, sorted: keys of the jobs
// bucket, spread through it, for the read-ahead to find.
func pendingKeys(tx *Tx) [][]byte {
	var ids [][]byte
	prefix := statusKey(StatusPending, 0)[:len(StatusPending)+1]
	c := tx.tx.Bucket(bucketStatus).Cursor()
	for k, id := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, id = c.Next() {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, bytes.Compare)
	return ids
}

// readAheadJobs reads ahead the leaves of the jobs bucket that hold keys.
func (t *Tx) readAheadJobs(keys [][]byte) (ReadAhead, error) {
	return t.readAhead(keyTree{root: uint64(t.tx.Bucket(bucketJobs).Root()), keys: keys})
}

// forEachJobHeadIn reads the head of each job of keys through bbolt,
// calling fn for each.
func (t *Tx) forEachJobHeadIn(keys [][]byte, fn func()) error {
	for _, id := range keys {
		if _, err := t.JobHead(string(id)); err != nil {
			return err
		}
		fn()
	}
	return nil
}
