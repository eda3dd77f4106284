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
// from every job's head that New did before, in turns with New, which goes
// first alternating). The page cache is warm (the
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
	iter := 0
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
		// New and the rebuild from every job's head it replaced (as before
		// the search index counted them), in turns: which goes first after
		// Open (reading pages no other step has mapped) alternates.
		var r, scan time.Duration
		steps := []func() error{
			func() error { _, err := fsm.New(st, nil); return err },
			func() error { return fsm.RebuildByScan(st) },
		}
		took := []*time.Duration{&r, &scan}
		first := "New"
		if iter%2 == 1 {
			steps[0], steps[1], took[0], took[1], first = steps[1], steps[0], took[1], took[0], "the scan"
		}
		iter++
		for i, step := range steps {
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
