package fsm_test

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// BenchmarkPendingMemory measures what a pending job costs the process's
// memory, as bench large_store's fill leaves them (docs/performance-store.md):
// it submits WORKRON_PENDING_JOBS jobs (200,000 unless set) through
// ApplyBatch, in entries of one submit of 1,000 shell jobs with generated
// ids (the bench's batch), none claimed, then opens a second FSM on the
// same store (fsm.New, a start's rebuild). After each it collects and
// reports, per pending job: the live heap (heap-B/job, MemStats.HeapAlloc
// over the baseline before the fill), the heap's spans in use
// (inuse-B/job, HeapInuse), and the process's anonymous memory
// (/proc/self/status RssAnon) at its peak during the fill (peak-anon-B/job,
// sampled every 10 entries) and once the freed heap is returned to the
// system (anon-B/job). Sizes, never times: run it once, with
//
//	WORKRON_PENDING_JOBS=1000000 go test ./fsm -run '^$' -bench BenchmarkPendingMemory -benchtime 1x
//
// WORKRON_PENDING_HEAPPROFILE=path writes a heap profile after the fill
// (go tool pprof -sample_index=inuse_space); WORKRON_PENDING_DIR puts the
// store there rather than in the test's temporary directory. It logs the
// collections the fill took; GOGC and GOMEMLIMIT apply as to a server.
func BenchmarkPendingMemory(b *testing.B) {
	n := 200_000
	if s := os.Getenv("WORKRON_PENDING_JOBS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	dir := os.Getenv("WORKRON_PENDING_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	for b.Loop() {
		path := filepath.Join(dir, "pending.db")
		os.Remove(path)
		base := memNow(b)
		st, err := store.Open(path, store.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		f, err := fsm.New(st, nil)
		if err != nil {
			b.Fatal(err)
		}
		peak := fillPending(b, f, n)
		filled := memNow(b)
		if p := os.Getenv("WORKRON_PENDING_HEAPPROFILE"); p != "" {
			writeHeapProfile(b, p)
		}
		runtime.KeepAlive(f)
		report := func(what string, m memFigures) {
			b.Logf("%s: heap alloc %d MiB, heap in use %d MiB, RssAnon %d MiB (baseline %d, %d, %d MiB)", what,
				m.alloc>>20, m.inuse>>20, m.anon>>20, base.alloc>>20, base.inuse>>20, base.anon>>20)
		}
		report("after the fill", filled)
		b.Logf("RssAnon at its peak during the fill: %d MiB; %d collections during the fill", peak>>20, filled.gcs-base.gcs-2)
		empty := memNow(b) // f is unreachable: its index is collected
		report("no FSM", empty)
		g, err := fsm.New(st, nil)
		if err != nil {
			b.Fatal(err)
		}
		rebuilt := memNow(b)
		report("after fsm.New", rebuilt)
		runtime.KeepAlive(g)
		per := func(v, from uint64) float64 { return (float64(v) - float64(from)) / float64(n) }
		b.ReportMetric(per(filled.alloc, base.alloc), "heap-B/job")
		b.ReportMetric(per(filled.inuse, base.inuse), "inuse-B/job")
		b.ReportMetric(per(filled.anon, base.anon), "anon-B/job")
		b.ReportMetric(per(peak, base.anon), "peak-anon-B/job")
		b.ReportMetric(per(rebuilt.alloc, empty.alloc), "new-heap-B/job")
		b.ReportMetric(per(rebuilt.inuse, empty.inuse), "new-inuse-B/job")
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		os.Remove(path)
	}
}

// fillPending applies n pending jobs to f and returns the highest RssAnon
// it saw.
func fillPending(b *testing.B, f *fsm.FSM, n int) uint64 {
	b.Helper()
	const per = 1000
	jobs := make([]fsm.NewJob, per)
	for i := range jobs {
		jobs[i] = fsm.NewJob{Command: "true", Queue: "large_store_fill"}
	}
	var peak uint64
	for i := 0; i*per < n; i++ {
		data, err := fsm.Encode(&fsm.Entry{Now: t0.UnixNano() + int64(i), Cmds: []fsm.Cmd{submit(jobs[:min(per, n-i*per)]...)}})
		if err != nil {
			b.Fatal(err)
		}
		res := f.ApplyBatch([]*raft.Log{{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}})
		if r := res[0].([]fsm.Result); r[0].Err != nil {
			b.Fatal(r[0].Err)
		}
		if i%10 == 0 {
			peak = max(peak, rssAnon(b))
		}
	}
	return peak
}

type memFigures struct {
	alloc, inuse, anon uint64
	gcs                uint32 // collections so far
}

// memNow collects, returns the freed heap to the system, and reads the
// heap's figures and the process's anonymous memory.
func memNow(b *testing.B) memFigures {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFigures{alloc: ms.HeapAlloc, inuse: ms.HeapInuse, anon: rssAnon(b), gcs: ms.NumGC}
}

// rssAnon reads the process's resident anonymous memory, in bytes.
func rssAnon(b *testing.B) uint64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Skip("no RssAnon in /proc/self/status")
	return 0
}

func writeHeapProfile(b *testing.B, path string) {
	fh, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	if err := pprof.Lookup("heap").WriteTo(fh, 0); err != nil {
		b.Fatal(err)
	}
}
