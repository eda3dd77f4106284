package fsm_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/workron/workron/fsm"
)

// TestNewReadsAheadAndGoesOnWithoutIt: New rebuilds the same indexes
// whether the read-ahead of the live jobs' pages works (it logs what it
// read) or fails (another, short file at the store's path: it logs why
// and goes on).
func TestNewReadsAheadAndGoesOnWithoutIt(t *testing.T) {
	st, f := newTestStoreFSM(t)
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
	newFSM := func() (string, string) {
		t.Helper()
		var log bytes.Buffer
		g, err := fsm.New(st, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return fsm.IndexDump(g), log.String()
	}
	got, log := newFSM()
	if got != want {
		t.Errorf("New's indexes differ from those kept by applying:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(log, "read the live jobs' pages ahead") || !strings.Contains(log, "jobs=2020") || strings.Contains(log, "leaves=0 ") {
		t.Errorf("New did not log a read-ahead of 2,020 live jobs' leaves: %s", log)
	}

	path := st.Path()
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
	got, log = newFSM()
	if got != want {
		t.Errorf("New without its read-ahead: indexes differ:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "reading the live jobs' pages ahead failed") {
		t.Errorf("New did not log that the read-ahead failed: %s", log)
	}
}
