package fsm_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/pagecache"
	"github.com/workron/workron/store"
)

// BenchmarkStart times the three steps of a node's start on a store of
// WORKRON_START_JOBS jobs (200,000 unless set; the large-store figures in
// docs/performance.md use 1,000,000), separately: store.VerifyPages, store.Open
// and fsm.New's rebuild of the in-memory indexes (and, logged, the rebuild
// from every job's head that New did before, in turns with New, which goes
// first alternating). The page cache is as the run left it (warm when
// the fill just wrote the file, as on a node restarted in place) unless
// WORKRON_START_COLD is set.
// WORKRON_START_PATH names a state file to keep between runs: filled if it
// does not exist, used as it is if it does (so that two builds can be timed
// on one large store).
//
// WORKRON_START_COLD=1 times each step with the file out of the page cache,
// as after a reboot or after other reads evicted it: before each step the
// file is synced and dropped from the cache (posix_fadvise DONTNEED, which
// leaves the pages a process has mapped: bbolt's meta and root pages after
// Open), this file only, not the machine's whole cache.
// WORKRON_START_NEW_ONLY=1 times only Open and New (a start's steps when
// the page check is deferred), leaving out VerifyPages and the scan, which
// take minutes at 10,000,000 jobs. WORKRON_START_LOG=1 logs New's debug
// lines (what it read ahead) to stderr.
func BenchmarkStart(b *testing.B) {
	n := 200000
	if s := os.Getenv("WORKRON_START_JOBS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	path := os.Getenv("WORKRON_START_PATH")
	if path == "" {
		path = filepath.Join(b.TempDir(), "state.db")
	}
	if _, err := os.Stat(path); err != nil {
		st, err := store.Open(path, store.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		fillStore(b, st, n)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
	cold := os.Getenv("WORKRON_START_COLD") == "1"
	newOnly := os.Getenv("WORKRON_START_NEW_ONLY") == "1"
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("WORKRON_START_LOG") == "1" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	evict := func() {
		if cold {
			pagecache.Drop(b, path)
		}
	}
	var verify, open, rebuild time.Duration
	iter := 0
	b.ResetTimer()
	for b.Loop() {
		var v time.Duration
		if !newOnly {
			evict()
			t := time.Now()
			if _, err := store.VerifyPages(path); err != nil {
				b.Fatal(err)
			}
			v = time.Since(t)
		}
		evict()
		t := time.Now()
		st, err := store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		o := time.Since(t)
		// New and the rebuild from every job's head it replaced (as before
		// the search index counted them), in turns: which goes first after
		// Open (reading pages no other step has mapped) alternates.
		var r, scan time.Duration
		steps := []func() error{
			func() error {
				logger.Debug("New starts")
				_, err := fsm.New(st, logger)
				logger.Debug("New ends")
				return err
			},
			func() error { return fsm.RebuildByScan(st) },
		}
		took := []*time.Duration{&r, &scan}
		first := "New"
		if newOnly {
			steps, took, first = steps[:1], took[:1], "New alone"
		} else if iter%2 == 1 {
			steps[0], steps[1], took[0], took[1], first = steps[1], steps[0], took[1], took[0], "the scan"
		}
		iter++
		for i, step := range steps {
			evict()
			t = time.Now()
			if err := step(); err != nil {
				b.Fatal(err)
			}
			*took[i] = time.Since(t)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.Logf("VerifyPages %v, Open %v, New %v, rebuild by scan %v (%s first)", v.Round(time.Millisecond), o.Round(time.Millisecond),
			r.Round(time.Millisecond), scan.Round(time.Millisecond), first)
		verify, open, rebuild = verify+v, open+o, rebuild+r
	}
	per := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
	b.ReportMetric(per(verify), "verify-ms")
	b.ReportMetric(per(open), "open-ms")
	b.ReportMetric(per(rebuild), "rebuild-ms")
}
