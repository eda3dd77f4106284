package store_test

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/store"
)

// backupFile writes a store's snapshot bytes, changed by mutate, to a file.
func backupFile(t *testing.T, data []byte, mutate func([]byte) []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.bak")
	if err := os.WriteFile(path, mutate(append([]byte(nil), data...)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVerify(t *testing.T) {
	src := newTestStore(t)
	insertJobs(t, src, 300, store.StatusPending, store.StatusRunning, store.StatusDone)
	update(t, src, func(tx *store.Tx) error {
		_, err := tx.NextLease(900)
		return errors.Join(err, tx.SetApplied(1000), tx.PutWorker(&store.Worker{ID: "w1"}, 1),
			tx.PutIdempotencyKey("k", "job-1", 0), tx.PutCheckpoint("job-2", 1, []byte("cp")))
	})
	good := snapshotBytes(t, src)
	const page = 4096

	t.Run("AcceptsAWholeFileAndDescribesIt", func(t *testing.T) {
		info, err := store.Verify(backupFile(t, good, func(b []byte) []byte { return b }))
		if err != nil {
			t.Fatal(err)
		}
		if info.Jobs != 300 || info.Applied != 1000 || info.LastLease != 900 || info.Size != int64(len(good)) || info.Format == 0 {
			t.Fatalf("info = %+v", info)
		}
	})

	flip := func(off, n int) func([]byte) []byte {
		return func(b []byte) []byte {
			for i := off; i < off+n && i < len(b); i++ {
				b[i] ^= 0xA5
			}
			return b
		}
	}
	cases := []struct {
		name   string
		mutate func([]byte) []byte
	}{
		{"Empty", func([]byte) []byte { return nil }},
		{"Text", func([]byte) []byte { return []byte("not a state file at all\n") }},
		{"TruncatedToHalf", func(b []byte) []byte { return b[:len(b)/2] }},
		{"TruncatedByOnePage", func(b []byte) []byte { return b[:len(b)-page] }},
		{"TruncatedToTheMetaPages", func(b []byte) []byte { return b[:2*page] }},
		{"BothMetaPagesFlipped", func(b []byte) []byte { return flip(page+16, 200)(flip(16, 200)(b)) }},
		{"RandomPages", func(b []byte) []byte { rand.New(rand.NewSource(1)).Read(b[2*page:]); return b }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := backupFile(t, good, c.mutate)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = store.Verify(path)
			if !errors.Is(err, store.ErrDamaged) {
				t.Fatalf("Verify = %v, want ErrDamaged", err)
			}
			after, _ := os.ReadFile(path)
			if string(after) != string(before) {
				t.Fatal("Verify changed the file")
			}
		})
	}

	// A page whose header is flipped is refused, unless the page is not
	// in use: then the file holds what it held.
	t.Run("200BytesFlippedAtAnyPageStart", func(t *testing.T) {
		want := digest(t, src)
		refused := 0
		for p := 2; p*page < len(good); p++ {
			path := backupFile(t, good, flip(p*page, 200))
			if _, err := store.Verify(path); err != nil {
				if !errors.Is(err, store.ErrDamaged) {
					t.Fatalf("page %d: Verify = %v, want ErrDamaged", p, err)
				}
				refused++
				continue
			}
			st, err := store.Open(path, store.Options{NoSync: true})
			if err != nil {
				t.Fatalf("page %d: open of a verified file: %v", p, err)
			}
			d := digest(t, st)
			st.Close()
			if d != want {
				t.Errorf("page %d: flipped, verified, and the state differs", p)
			}
		}
		if refused == 0 {
			t.Fatal("no flipped page was refused")
		}
		t.Logf("refused %d of %d pages flipped", refused, len(good)/page-2)
	})

	// Anywhere 200 bytes are flipped, Verify refuses the file or the file
	// opens and reads back whole: it never panics or faults.
	t.Run("FlippedBytesAnywhereNeverCrash", func(t *testing.T) {
		r := rand.New(rand.NewSource(2))
		refused := 0
		for i := 0; i < 40; i++ {
			path := backupFile(t, good, flip(r.Intn(len(good)), 200))
			if _, err := store.Verify(path); err != nil {
				if !errors.Is(err, store.ErrDamaged) {
					t.Fatalf("Verify = %v, want ErrDamaged", err)
				}
				refused++
				continue
			}
			st, err := store.Open(path, store.Options{NoSync: true})
			if err != nil {
				t.Fatalf("open of a verified file: %v", err)
			}
			err = st.Check()
			st.Close()
			if err != nil {
				t.Fatalf("check of a verified file: %v", err)
			}
		}
		t.Logf("refused %d of 40 files with 200 flipped bytes", refused)
	})

	t.Run("ARecordThatDoesNotDecodeIsFoundByVerifyNotByVerifyPages", func(t *testing.T) {
		path := backupFile(t, good, func(b []byte) []byte { return b })
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("workers")).Put([]byte("w1"), []byte("{not json")) })
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Verify(path); !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "worker w1") {
			t.Fatalf("Verify = %v, want ErrDamaged naming worker w1", err)
		}
		if _, err := store.VerifyPages(path); err != nil {
			t.Fatalf("VerifyPages = %v, want nil: it reads pages, not records", err)
		}
	})

	t.Run("RefusesABboltFileThatIsNotAStateFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "other.db")
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err })
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Verify(path); !errors.Is(err, store.ErrDamaged) {
			t.Fatalf("Verify = %v, want ErrDamaged", err)
		}
	})
}

// TestVerifyRefusesAPageCycle: a branch page whose child is the page
// itself (or an ancestor) is refused as damage. bbolt's cursor descends
// such a tree forever, its stack growing until the process runs out of
// memory, so Verify (and with it every restore of an uploaded backup)
// must find the cycle before bbolt walks the tree.
func TestVerifyRefusesAPageCycle(t *testing.T) {
	src := newTestStore(t)
	insertJobs(t, src, 3000, store.StatusPending)
	good := snapshotBytes(t, src)
	path := backupFile(t, good, func(b []byte) []byte { return b })

	// Find a branch page with bbolt, then point its first child at itself.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	pageSize := db.Info().PageSize
	branch := -1
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; int64(id)*int64(pageSize) < tx.Size(); id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p != nil && p.Type == "branch" {
				branch = id
				return nil
			}
		}
		return nil
	})
	db.Close()
	if err != nil || branch < 0 {
		t.Fatalf("no branch page in a store of 3,000 jobs (err %v)", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := branch*pageSize + 16 + 8 // the first element's child page id
	for i := range 8 {
		b[off+i] = byte(uint64(branch) >> (8 * i))
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, verify := range map[string]func(string) (store.Info, error){"Verify": store.Verify, "VerifyPages": store.VerifyPages} {
		if _, err := verify(path); !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "reached twice") {
			t.Errorf("%s = %v, want ErrDamaged naming a page reached twice", name, err)
		}
	}
}
