package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The search benchmarks (docs/performance.md, "Search"). They print
// figures and assert none. WORKRON_SEARCH_JOBS sets how many jobs the
// store holds (default 100,000); WORKRON_SEARCH_DIR keeps the store built
// for that many between runs (default: built again in a temp dir).
//
//	WORKRON_SEARCH_JOBS=1000000 WORKRON_SEARCH_DIR=/tmp/search \
//	  go test -run '^$' -bench 'BenchmarkSearch' -benchtime 200x ./store

func searchJobs() int {
	if n, err := strconv.Atoi(os.Getenv("WORKRON_SEARCH_JOBS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// benchJob is job seq of a fixture: 16 queues, 8 types, 1,000 tenants,
// 4 regions; 80% done, 5% failed, 10% pending, 5% running; a concurrency
// key on one job in 10, a schedule on one in 20.
func benchJob(seq uint64) *Job {
	i := int(seq)
	st := StatusDone
	switch r := i % 20; {
	case r == 0:
		st = StatusFailed
	case r <= 2:
		st = StatusPending
	case r == 3:
		st = StatusRunning
	}
	j := &Job{ID: fmt.Sprintf("job-%d", seq), Seq: seq, Status: st,
		Queue: fmt.Sprintf("q%d", i%16), Type: fmt.Sprintf("type%d", i%8/2), Command: "./run --fast",
		MaxAttempts: 3, CreatedAt: int64(seq) * 1e6, RunAt: int64(seq) * 1e6,
		Metadata: map[string]string{"tenant": fmt.Sprintf("t%d", i%1000), "region": fmt.Sprintf("r%d", i%4)}}
	if i%10 == 0 {
		j.ConcurrencyKey = fmt.Sprintf("user-%d", i%500)
	}
	if i%20 == 7 {
		j.Schedule = "nightly"
	}
	return j
}

// insertBench inserts jobs (benchJob) from seq first on, batch per
// transaction.
func insertBench(tb testing.TB, st *Store, first uint64, n, batch int) {
	insertJobs(tb, st, first, n, batch, benchJob)
}

// insertJobs inserts job(seq) from seq first on, batch per transaction.
func insertJobs(tb testing.TB, st *Store, first uint64, n, batch int, job func(seq uint64) *Job) {
	tb.Helper()
	for done := 0; done < n; {
		err := st.Update(func(tx *Tx) error {
			for k := 0; k < batch && done < n; k++ {
				seq, err := tx.NextSeq()
				if err != nil {
					return err
				}
				if seq != first+uint64(done) {
					return fmt.Errorf("seq %d, want %d", seq, first+uint64(done))
				}
				if err := tx.InsertJob(job(seq), seq); err != nil {
					return err
				}
				done++
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// searchFixture is the path of a state file of searchJobs() jobs.
func searchFixture(b *testing.B) string {
	b.Helper()
	n := searchJobs()
	dir := os.Getenv("WORKRON_SEARCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("search-%d.db", n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	st, err := Open(path+".tmp", Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	insertBench(b, st, 1, n, 10000)
	b.Logf("built a store of %d jobs in %v", n, time.Since(start).Round(time.Millisecond))
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	return path
}

func openFixture(b *testing.B, path string) *Store {
	b.Helper()
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// reportLatency reports the p50 and p95 of ds in milliseconds.
func reportLatency(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	at := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))]) / 1e6 }
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(0, "ns/op")
}

var searchFilters = []struct {
	name string
	q    ListQuery
}{
	{"Queue", ListQuery{Terms: []IndexTerm{{Field: FieldQueue, Value: "q3"}}}},
	{"FailedOfQueue", ListQuery{Status: StatusFailed, Terms: []IndexTerm{{Field: FieldQueue, Value: "q0"}}}},
	{"Tenant", ListQuery{Terms: []IndexTerm{{Field: FieldMetadata, Key: "tenant", Value: "t42"}}}},
	{"FailedOfTenant", ListQuery{Status: StatusFailed, Terms: []IndexTerm{{Field: FieldMetadata, Key: "tenant", Value: "t40"}}}},
	{"TypeAndRegion", ListQuery{Terms: []IndexTerm{{Field: FieldType, Value: "type1"}, {Field: FieldMetadata, Key: "region", Value: "r2"}}}},
	{"ConcurrencyKey", ListQuery{Terms: []IndexTerm{{Field: FieldConcurrencyKey, Value: "user-70"}}}},
	{"Schedule", ListQuery{Status: StatusDone, Terms: []IndexTerm{{Field: FieldSchedule, Value: "nightly"}}}},
	// No job is both pending and of region r0 (pending jobs have i%20 of
	// 1 or 2, so i%4 of 1 or 2): two large lists, interleaved, intersect
	// to nothing, the join's worst case.
	{"DisjointPendingAndRegion", ListQuery{Status: StatusPending, Terms: []IndexTerm{{Field: FieldMetadata, Key: "region", Value: "r0"}}}},
}

// BenchmarkSearchFirstPage lists the first page of 50 for filters with an
// indexed term, as GET /jobs does (its scan budget included).
func BenchmarkSearchFirstPage(b *testing.B) {
	st := openFixture(b, searchFixture(b))
	for _, f := range searchFilters {
		b.Run(f.name, func(b *testing.B) {
			q := f.q
			q.Limit, q.Scan, q.ScanBytes = 50, 10_000, 8<<20
			ds := make([]time.Duration, 0, b.N)
			var got int
			for b.Loop() {
				start := time.Now()
				err := st.View(func(tx *Tx) error {
					jobs, _, err := tx.ListJobs(q)
					got = len(jobs)
					return err
				})
				ds = append(ds, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got), "jobs")
			reportLatency(b, ds)
		})
	}
}

// BenchmarkSearchCount counts exactly, without a budget.
func BenchmarkSearchCount(b *testing.B) {
	st := openFixture(b, searchFixture(b))
	cases := append([]struct {
		name string
		q    ListQuery
	}{{"All", ListQuery{}}, {"Done", ListQuery{Status: StatusDone}}, {"Region", ListQuery{Terms: []IndexTerm{{Field: FieldMetadata, Key: "region", Value: "r1"}}}}}, searchFilters...)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			var n int
			for b.Loop() {
				start := time.Now()
				err := st.View(func(tx *Tx) error {
					var (
						exact bool
						err   error
					)
					n, exact, _, err = tx.CountJobs(c.q, 0)
					if err == nil && !exact {
						err = fmt.Errorf("count of %s not exact", c.name)
					}
					return err
				})
				ds = append(ds, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "matches")
			reportLatency(b, ds)
		})
	}
}

// BenchmarkSearchIndexCost is the A/B of what the index costs the store's
// part of a batch submit: each iteration inserts one batch of 1,000 jobs (of
// one job, for OneJobATransaction)
// into a copy of the fixture that keeps the index and one into a copy that
// does not (Store.noIndex), one after the other, and reports both rates
// and the bytes of pages each commit wrote per job. AnotherTenantEach
// gives every job of a batch a tenant of its own, the index's worst case
// (a new list per job); TenTenants gives the batch's jobs 10 tenants;
// MetadataShape is the jobs of workron bench's submit_batch_metadata
// (metadataJob: 6 lists a job, 3 of them new to their epoch). fsm's
// BenchmarkSubmitBatch, run with and without the tag
// workron_bench_noindex, measures the whole apply.
func BenchmarkSearchIndexCost(b *testing.B) {
	path := searchFixture(b)
	for _, c := range []struct {
		name    string
		tenants uint64
		batch   int
	}{{"AnotherTenantEach", 1000, 1000}, {"TenTenants", 10, 1000}, {"AnotherTenantEachOneJobATransaction", 1000, 1}} {
		b.Run(c.name, func(b *testing.B) {
			job := func(seq uint64) *Job {
				j := benchJob(seq)
				j.Metadata["tenant"] = fmt.Sprintf("t%d", seq%c.tenants)
				return j
			}
			indexCost(b, path, job, c.batch)
		})
	}
	b.Run("MetadataShape", func(b *testing.B) { indexCost(b, path, metadataJob, 1000) })
}

// metadataJob is job seq in the shape of workron bench's
// submit_batch_metadata (internal/tools/bench): pending, of 4 queues, 4
// types and 64 concurrency keys, with metadata customer, order and request
// of values no other job has.
func metadataJob(seq uint64) *Job {
	n := strconv.FormatUint(seq, 10)
	return &Job{ID: "job-" + n, Seq: seq, Status: StatusPending, Queue: "bench-meta-q" + strconv.FormatUint(seq%4, 10),
		Type: "bench-meta-" + strconv.FormatUint(seq%4, 10), ConcurrencyKey: "key-" + strconv.FormatUint(seq%64, 10),
		MaxAttempts: 3, CreatedAt: int64(seq) * 1e6, RunAt: int64(seq) * 1e6,
		Metadata: map[string]string{"customer": "crun-" + n, "order": "orun-" + n, "request": "rrun-" + n}}
}

func indexCost(b *testing.B, path string, job func(uint64) *Job, batch int) {
	a, plain := openFixture(b, copyFile(b, path, "a")), openFixture(b, copyFile(b, path, "b"))
	plain.noIndex = true
	next := uint64(searchJobs()) + 1
	var ta, tb, ca, cb time.Duration
	wa, wb := a.BytesWritten(), plain.BytesWritten()
	for b.Loop() {
		start, cpu := time.Now(), cpuTime()
		insertJobs(b, a, next, batch, batch, job)
		ta, ca = ta+time.Since(start), ca+cpuTime()-cpu
		start, cpu = time.Now(), cpuTime()
		insertJobs(b, plain, next, batch, batch, job)
		tb, cb = tb+time.Since(start), cb+cpuTime()-cpu
		next += uint64(batch)
	}
	jobs := float64(next - uint64(searchJobs()) - 1)
	b.ReportMetric(jobs/ta.Seconds(), "indexed-jobs/s")
	b.ReportMetric(jobs/tb.Seconds(), "plain-jobs/s")
	b.ReportMetric(float64(ca.Nanoseconds())/jobs, "indexed-cpu-ns/job")
	b.ReportMetric(float64(cb.Nanoseconds())/jobs, "plain-cpu-ns/job")
	b.ReportMetric(float64(a.BytesWritten()-wa)/jobs, "indexed-page-B/job")
	b.ReportMetric(float64(plain.BytesWritten()-wb)/jobs, "plain-page-B/job")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the CPU time the process has used: what a batch costs on a
// machine whose other work would blur its wall-clock time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func copyFile(b *testing.B, src, name string) string {
	b.Helper()
	dst := filepath.Join(b.TempDir(), name+".db")
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	return dst
}

// BenchmarkSearchIndexBuild times what Open does to a file of the release
// before the index: build it from the records, indexBuildBatch jobs a
// transaction. One iteration is one build of the whole fixture.
func BenchmarkSearchIndexBuild(b *testing.B) {
	path := copyFile(b, searchFixture(b), "old")
	for b.Loop() {
		b.StopTimer()
		st, err := Open(path, Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		toPreviousRelease(b, st)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err = Open(path, Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/build")
}

// BenchmarkSearchCountByStatus counts as GET /jobs/count does a filter of
// indexed terms (api countByIndex): CountByStatus, in one read, given the
// seqs of every pending job as those to count apart (as if every pending
// job were scheduled: the FSM passes its delayed ones).
func BenchmarkSearchCountByStatus(b *testing.B) {
	st := openFixture(b, searchFixture(b))
	var pending []uint64
	for seq := uint64(1); seq <= uint64(searchJobs()); seq++ {
		if benchJob(seq).Status == StatusPending {
			pending = append(pending, seq)
		}
	}
	for _, c := range []struct {
		name  string
		terms []IndexTerm
	}{{"All", nil}, {"Queue", searchFilters[0].q.Terms}, {"Region", []IndexTerm{{Field: FieldMetadata, Key: "region", Value: "r1"}}}} {
		b.Run(c.name, func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			var got StatusCounts
			for b.Loop() {
				start := time.Now()
				err := st.View(func(tx *Tx) error {
					var err error
					got, err = tx.CountByStatus(ListQuery{Terms: c.terms}, pending)
					return err
				})
				ds = append(ds, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			total := 0
			for _, n := range got.ByStatus {
				total += n
			}
			b.ReportMetric(float64(total), "matches")
			b.ReportMetric(float64(got.Among), "scheduled")
			reportLatency(b, ds)
		})
	}
}

// BenchmarkSearchIndexKeep times the index's own work for a batch of 1,000
// new jobs: noting each job's lists (indexJob) and writing them
// (flushIndex), in a write transaction rolled back after, so every
// iteration writes the same batch into the same index (of 100 batches
// before it). MetadataShape is metadataJob's jobs, Fixture benchJob's. It
// reports ns/job, cpu-ns/job and allocs/job.
func BenchmarkSearchIndexKeep(b *testing.B) {
	for _, c := range []struct {
		name string
		job  func(uint64) *Job
	}{{"MetadataShape", metadataJob}, {"Fixture", benchJob}} {
		b.Run(c.name, func(b *testing.B) {
			st, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			const batch = 1000
			insertJobs(b, st, 1, 100*batch, batch, c.job)
			jobs := make([]*Job, batch)
			for i := range jobs {
				jobs[i] = c.job(uint64(100*batch + 1 + i))
			}
			rolledBack := errors.New("rolled back")
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				err := st.Update(func(tx *Tx) error {
					for _, j := range jobs {
						if err := tx.indexJob(j); err != nil {
							return err
						}
					}
					if err := tx.flushIndex(); err != nil {
						return err
					}
					return rolledBack
				})
				if err != rolledBack {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N)/batch, "cpu-ns/job")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batch, "ns/job")
			b.ReportMetric(0, "ns/op")
		})
	}
}
