package fsm_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/pagecache"
	"github.com/workron/workron/store"
)

// TestNewReadsAheadAndGoesOnWithoutIt: New rebuilds the same indexes
// whether the read-ahead of the live jobs' heads' pages works (it logs what it
// read), finds the file cached (it maps the leaves ahead all the same), or fails (another, short file at the
// store's path: it logs why and goes on).
func TestNewReadsAheadAndGoesOnWithoutIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsm.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, f: f, now: t0}
	pad := strings.Repeat("x", 200)
	for range 20 {
		jobs := make([]fsm.NewJob, 100)
		for i := range jobs {
			jobs[i] = fsm.NewJob{Command: "/bin/true " + pad, Queue: fmt.Sprintf("q%d", i%3)}
		}
		h.submit(jobs...)
		h.claim(fsm.Claim{WorkerID: "w1", Max: 10, LeaseTTL: int64(ttl)})
		h.submit(fsm.NewJob{Command: "x", Queue: "q0"})
	}
	want := fsm.IndexDump(f)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Opened again after the file left the page cache: bbolt's mapping
	// holds only the pages Open read.
	pagecache.Drop(t, path)
	if st, err = store.Open(path, store.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	newFSM := func(what string) string {
		t.Helper()
		var log bytes.Buffer
		g, err := fsm.New(st, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Fatalf("New %s: %v", what, err)
		}
		if got := fsm.IndexDump(g); got != want {
			t.Errorf("New %s: indexes differ from those kept by applying:\n%s\nwant\n%s", what, got, want)
		}
		return log.String()
	}
	const of = `of="the counts and the live jobs' heads"`
	if log := newFSM("out of the cache"); strings.Count(log, `msg="read pages ahead"`) != 1 || !strings.Contains(log, of+" cached=false") ||
		strings.Contains(log, "leaves=0 ") {
		t.Errorf("New did not log a read-ahead of the counts' and the live jobs' heads' leaves: %s", log)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if log := newFSM("in the cache"); strings.Count(log, "cached=true ") != 1 || !strings.Contains(log, of+" cached=true") ||
		strings.Contains(log, "leaves=0 ") || strings.Contains(log, "mapped=0") || strings.Contains(log, "mapping pages ahead stopped") {
		t.Errorf("New did not log that the file was in the page cache and the leaves mapped ahead: %s", log)
	}

	if err := os.Rename(path, path+".aside"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Rename(path+".aside", path); err != nil {
			t.Error(err)
		}
	}()
	if err := os.WriteFile(path, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	pagecache.Drop(t, path)
	if log := newFSM("without its read-ahead"); !strings.Contains(log, "level=WARN") || strings.Count(log, "reading pages ahead failed") != 1 {
		t.Errorf("New did not log that the read-ahead failed: %s", log)
	}
}
