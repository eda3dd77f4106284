package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/store"
)

// newestMeta reads the freelist page id and the root bucket's root page of
// the newest meta page of a closed bbolt file of 4 KiB pages.
func newestMeta(t *testing.T, path string) (freelist, root uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	var txid uint64
	for _, off := range []int{0, 4096} {
		m := b[off+16:]
		if tx := le.Uint64(m[48:]); tx >= txid {
			txid, freelist, root = tx, le.Uint64(m[32:]), le.Uint64(m[16:])
		}
	}
	return freelist, root
}

// The freelist page is written (Options.NoFreelistSync off, so a start
// need not walk every page to find the free ones), and the page check
// refuses one that lists a page in use: bbolt would hand it out again.
func TestVerifyPagesChecksTheFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	jobs := insertJobs(t, st, 2000, store.StatusPending, store.StatusDone)
	update(t, st, func(tx *store.Tx) error {
		for _, j := range jobs[:1000] {
			if err := tx.DeleteJob(j); err != nil {
				return err
			}
		}
		return nil
	})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.VerifyPages(path); err != nil {
		t.Fatalf("VerifyPages of a sound file: %v", err)
	}
	freelist, root := newestMeta(t, path)
	if freelist == ^uint64(0) {
		t.Fatal("the freelist was not written")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := b[freelist*4096:]
	if n := binary.LittleEndian.Uint16(p[10:]); n == 0 || n == 0xFFFF {
		t.Fatalf("freelist of %d ids: want a few to damage", n)
	}
	binary.LittleEndian.PutUint64(p[16:], root) // a free page that is the root bucket's root
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.VerifyPages(path); !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "free and in use") {
		t.Fatalf("VerifyPages = %v, want ErrDamaged naming a page free and in use", err)
	}
}

// A file written without its freelist (NoFreelistSync, as every state file
// was before) still opens, and is given one.
func TestOpenAFileWithoutAFreelist(t *testing.T) {
	path := closedStore(t, 500)
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if freelist, _ := newestMeta(t, path); freelist != ^uint64(0) {
		t.Fatalf("freelist page %d, want none", freelist)
	}
	if _, err := store.VerifyPages(path); err != nil {
		t.Fatalf("VerifyPages of a file without a freelist: %v", err)
	}
	if err := store.QuickCheck(path); err != nil {
		t.Fatalf("QuickCheck of a file without a freelist: %v", err)
	}
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.View(func(tx *store.Tx) error { _, err := tx.Job("job-500"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if freelist, _ := newestMeta(t, path); freelist == ^uint64(0) {
		t.Fatal("Open did not write the freelist")
	}
	if _, err := store.VerifyPages(path); err != nil {
		t.Fatal(err)
	}
}

// A page check of an open store checks the file as of when it was taken,
// while writes go on, and a closed stop channel ends it early.
func TestPageCheckOfAnOpenStore(t *testing.T) {
	st := newTestStore(t)
	insertJobs(t, st, 3000, store.StatusPending)
	pc, err := st.NewPageCheck()
	if err != nil {
		t.Fatal(err)
	}
	insertJobs(t, st, 3000, store.StatusRunning) // written while the check runs
	info, err := pc.Run(nil)
	pc.Close()
	if err != nil || info.Format == 0 {
		t.Fatalf("Run = %+v, %v", info, err)
	}

	// A restore replaces the file: the check still reads the one it began
	// on.
	pc, err = st.NewPageCheck()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Restore(bytes.NewReader(snapshotBytes(t, st))); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Run(nil); err != nil {
		t.Fatalf("Run on the file a restore replaced: %v", err)
	}
	pc.Close()

	pc, err = st.NewPageCheck()
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	stop := make(chan struct{})
	close(stop)
	if _, err := pc.Run(stop); !errors.Is(err, store.ErrCheckStopped) {
		t.Fatalf("Run with stop closed = %v, want ErrCheckStopped", err)
	}
}

// A compacted file carries its freelist, so the start after a compaction
// does not walk every page either.
func TestCompactWritesTheFreelist(t *testing.T) {
	path := closedStore(t, 500)
	if _, err := store.Compact(path); err != nil {
		t.Fatal(err)
	}
	if freelist, _ := newestMeta(t, path); freelist == ^uint64(0) {
		t.Fatal("the compacted file has no freelist")
	}
	if _, err := store.VerifyPages(path); err != nil {
		t.Fatal(err)
	}
}

// QuickCheck passes a sound file (with or without a freelist page) and
// refuses one whose pages a start reads first are damaged: every data
// page's header flipped, or the freelist page listing a page outside the
// file.
func TestQuickCheck(t *testing.T) {
	path := closedStore(t, 2000)
	if err := store.QuickCheck(path); err != nil {
		t.Fatalf("QuickCheck of a sound file: %v", err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func(b []byte){
		"EveryDataPageFlipped": func(b []byte) {
			for off := 2 * 4096; off < len(b); off += 4096 {
				for i := off; i < min(off+200, len(b)); i++ {
					b[i] ^= 0xA5
				}
			}
		},
		"FreelistPastTheEnd": func(b []byte) {
			freelist, _ := newestMeta(t, path)
			p := b[freelist*4096:]
			binary.LittleEndian.PutUint16(p[10:], 1)
			binary.LittleEndian.PutUint64(p[16:], 1<<40)
		},
		"MetaPagesZeroed": func(b []byte) { clear(b[:2*4096]) },
	}
	for name, do := range damage {
		t.Run(name, func(t *testing.T) {
			b := append([]byte(nil), good...)
			do(b)
			bad := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(bad, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := store.QuickCheck(bad); !errors.Is(err, store.ErrDamaged) {
				t.Fatalf("QuickCheck = %v, want ErrDamaged", err)
			}
		})
	}
}

// closedStore writes a state file of jobs pending jobs, closes it and
// returns its path.
func closedStore(t *testing.T, jobs int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	insertJobs(t, st, jobs, store.StatusPending)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
