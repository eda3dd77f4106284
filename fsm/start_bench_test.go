package fsm_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// BenchmarkStart times the three steps of a node's start on a store of
// WORKRON_START_JOBS jobs (200,000 unless set; the large-store figures in
// docs/performance.md use 1,000,000), separately: store.VerifyPages, store.Open
// and fsm.New's rebuild of the in-memory indexes (and, logged, the rebuild
// from every job's head that New did before, in turns with New). The page cache is warm (the
// fill just wrote the file), as on a node restarted in place.
// WORKRON_START_PATH names a state file to keep between runs: filled if it
// does not exist, used as it is if it does (so that two builds can be timed
// on one large store).
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
	var verify, open, rebuild time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		if _, err := store.VerifyPages(path); err != nil {
			b.Fatal(err)
		}
		v := time.Since(t)
		t = time.Now()
		st, err := store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		o := time.Since(t)
		t = time.Now()
		if _, err := fsm.New(st, nil); err != nil {
			b.Fatal(err)
		}
		r := time.Since(t)
		// The rebuild from every job's head, as before the search index
		// counted them, then New again: the two rebuilds in turns, on the
		// same page cache.
		t = time.Now()
		if err := fsm.RebuildByScan(st); err != nil {
			b.Fatal(err)
		}
		scan := time.Since(t)
		t = time.Now()
		if _, err := fsm.New(st, nil); err != nil {
			b.Fatal(err)
		}
		r2 := time.Since(t)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.Logf("VerifyPages %v, Open %v, New %v, rebuild by scan %v, New again %v", v.Round(time.Millisecond), o.Round(time.Millisecond),
			r.Round(time.Millisecond), scan.Round(time.Millisecond), r2.Round(time.Millisecond))
		verify, open, rebuild = verify+v, open+o, rebuild+r
	}
	per := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
	b.ReportMetric(per(verify), "verify-ms")
	b.ReportMetric(per(open), "open-ms")
	b.ReportMetric(per(rebuild), "rebuild-ms")
}
