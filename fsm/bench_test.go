package fsm_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// fillStore stores n jobs shaped like a long-running cluster's: 90 % done
// and 2.5 % failed (with their attempt history), 5 % pending (half of them
// delayed) and 2.5 % running, over three queues.
func fillStore(b *testing.B, st *store.Store, n int) {
	b.Helper()
	now := t0.UnixNano()
	queues := []string{"default", "etl", "emails"}
	const batch = 10000
	for done := 0; done < n; done += batch {
		err := st.Update(func(tx *store.Tx) error {
			for i := done; i < min(done+batch, n); i++ {
				seq, err := tx.NextSeq()
				if err != nil {
					return err
				}
				j := benchJob(seq, queues[i%len(queues)], i%40, now)
				if err := tx.InsertJob(j, seq); err != nil {
					return err
				}
			}
			return tx.SetLastNow(now)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchJob is the job of the given seq in the status its slot (0..39) picks.
func benchJob(seq uint64, queue string, slot int, now int64) *store.Job {
	created := now - int64(time.Hour) + int64(seq)*int64(time.Millisecond)
	j := &store.Job{
		ID: fmt.Sprintf("job-%d", seq), Seq: seq, Queue: queue, Priority: slot % 3,
		Command:     fmt.Sprintf("/usr/local/bin/report --customer %d --format pdf", seq),
		Metadata:    map[string]string{"source": "api"},
		MaxAttempts: 3, Timeout: int64(10 * time.Minute),
		Backoff:   store.Backoff{Base: int64(time.Second), Max: int64(time.Hour), Jitter: 0.3},
		CreatedAt: created, RunAt: created,
	}
	exit0, exit1 := 0, 1
	attempt := func(n int, worker string, st store.Status, exit *int, msg string) store.Attempt {
		return store.Attempt{Attempt: n, WorkerID: worker, Lease: seq*4 + uint64(n), Status: st, ExitCode: exit, Error: msg,
			Started: created + int64(n)*int64(time.Second), Ended: created + int64(n+1)*int64(time.Second)}
	}
	switch {
	case slot < 36: // done, first try
		j.Status, j.Attempts = store.StatusDone, 1
		j.History = []store.Attempt{attempt(1, "worker-07", store.StatusDone, &exit0, "")}
		j.WorkerID, j.Lease, j.ExitCode, j.Output = "worker-07", seq*4+1, &exit0, "wrote report.pdf (48 KiB)\n"
		j.StartedAt, j.DoneAt = j.History[0].Started, j.History[0].Ended
	case slot == 36: // failed after three attempts
		j.Status, j.Attempts = store.StatusFailed, 3
		for n := 1; n <= 3; n++ {
			j.History = append(j.History, attempt(n, "worker-02", store.StatusFailed, &exit1, "exit status 1: upstream timed out"))
		}
		j.WorkerID, j.Lease, j.ExitCode, j.LastError = "worker-02", seq*4+3, &exit1, "exit status 1: upstream timed out"
		j.StartedAt, j.DoneAt = j.History[2].Started, j.History[2].Ended
	case slot == 37: // pending, due
		j.Status = store.StatusPending
	case slot == 38: // pending, delayed
		j.Status, j.RunAt = store.StatusPending, now+int64(time.Hour)
	default: // running
		j.Status, j.Attempts = store.StatusRunning, 1
		j.WorkerID, j.Lease, j.LeaseDeadline = fmt.Sprintf("worker-%02d", seq%16), seq*4+1, now+int64(30*time.Second)
		j.StartedAt = now - int64(time.Second)
	}
	return j
}

// BenchmarkNew times what a node's start (and a snapshot restore) spends
// rebuilding the in-memory indexes from a store of 200,000 jobs.
func BenchmarkNew(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const n = 200000
	fillStore(b, st, n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := fsm.New(st, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/job")
}

// BenchmarkApply times the FSM on the hot path: a submit of 16 jobs, a
// claim of those 16 and a batch report of them done, each one log entry
// (encoded before the timer starts).
func BenchmarkApply(b *testing.B) {
	f := newBenchFSM(b)
	const per = 16
	var logs []*raft.Log
	entry := func(cmds ...fsm.Cmd) {
		index := uint64(len(logs) + 1)
		data, err := fsm.Encode(&fsm.Entry{Now: t0.UnixNano() + int64(index), Cmds: cmds})
		if err != nil {
			b.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: index, Type: raft.LogCommand, Data: data})
	}
	jobs := make([]fsm.NewJob, per)
	for i := range jobs {
		jobs[i] = fsm.NewJob{Command: "/usr/local/bin/report --format pdf", Queue: "default", MaxAttempts: 3,
			Metadata: map[string]string{"source": "api"}, Backoff: store.Backoff{Base: int64(time.Second), Max: int64(time.Hour), Jitter: 0.3}}
	}
	claim := claimCmd(fsm.Claim{WorkerID: "worker-1", Max: per, LeaseTTL: int64(ttl)})
	for i := range b.N {
		entry(submit(jobs...))
		entry(claim)
		reports := make([]fsm.Cmd, per)
		for k := range reports {
			id := fmt.Sprintf("%s%d", fsm.JobIDPrefix, i*per+k+1) // the FSM numbers jobs from 1
			reports[k] = report(fsm.Report{JobID: id, Success: true, Output: "wrote report.pdf (48 KiB)\n", ExitCode: intp(0)})
		}
		entry(reports...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < len(logs); i += 3 {
		f.ApplyBatch(logs[i : i+1])
		claimed := f.ApplyBatch(logs[i+1 : i+2])[0].([]fsm.Result)[0].Jobs
		done := f.ApplyBatch(logs[i+2 : i+3])[0].([]fsm.Result)
		if len(claimed) != per || done[per-1].Err != nil {
			b.Fatalf("claimed %d jobs, want %d; last report: %v", len(claimed), per, done[per-1].Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/per, "ns/job")
}

// codecEntries are the entries BenchmarkEncode and BenchmarkDecode time: a
// batch submit of 1,000 jobs, and 16 reports, as a batch report or the
// proposer's batching packs them.
func codecEntries() map[string]*fsm.Entry {
	jobs := make([]fsm.NewJob, 1000)
	for i := range jobs {
		jobs[i] = fsm.NewJob{Command: fmt.Sprintf("/usr/local/bin/report --customer %d --format pdf", i), Queue: "default",
			MaxAttempts: 3, Metadata: map[string]string{"source": "api"},
			Backoff: store.Backoff{Base: int64(time.Second), Max: int64(time.Hour), Jitter: 0.3}}
	}
	reports := make([]fsm.Cmd, 16)
	for i := range reports {
		reports[i] = report(fsm.Report{JobID: fmt.Sprintf("job-%d", 1000+i), Lease: uint64(4000 + i), Success: true,
			ExitCode: intp(0), Output: "wrote report.pdf (48 KiB)\n", Draw: float64(i) / 16})
	}
	now := t0.UnixNano()
	return map[string]*fsm.Entry{
		"Submit1000": {Now: now, Cmds: []fsm.Cmd{submit(jobs...)}},
		"Report16":   {Now: now, Cmds: reports},
	}
}

func BenchmarkEncode(b *testing.B) {
	for name, e := range codecEntries() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fsm.Encode(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for name, e := range codecEntries() {
		data, err := fsm.Encode(e)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fsm.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes")
		})
	}
}

// BenchmarkClaimWithKeyLimits times claim then report of one job, among
// 30,000 pending jobs of 10,000 concurrency keys, with and without a limit
// of one running per key (9,000 keys at it), with claims by priority and
// Fair ones (in turns over the keys); and, for comparison, of jobs without
// keys, by both kinds of claim. It measures; it asserts no speed.
func BenchmarkClaimWithKeyLimits(b *testing.B) {
	for _, bc := range []struct {
		name                 string
		keyed, limited, fair bool
	}{
		{"NoKeys", false, false, false},
		{"NoKeysFair", false, false, true},
		{"Unlimited", true, false, false},
		{"UnlimitedFair", true, false, true},
		{"KeyConcurrency1", true, true, false},
		{"KeyConcurrency1Fair", true, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newBenchFSM(b)
			index := uint64(0)
			apply := func(cmds ...fsm.Cmd) []fsm.Result {
				index++
				data, err := fsm.Encode(&fsm.Entry{Now: t0.UnixNano() + int64(index), Cmds: cmds})
				if err != nil {
					b.Fatal(err)
				}
				return f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: data}})[0].([]fsm.Result)
			}
			if bc.limited {
				apply(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1}))
			}
			const keys = 10000
			key := func(k int) string {
				if !bc.keyed {
					return ""
				}
				return fmt.Sprint("tenant-", k)
			}
			for round := range 3 {
				jobs := make([]fsm.NewJob, keys)
				for k := range jobs {
					jobs[k] = fsm.NewJob{Command: "x", ConcurrencyKey: key(k), Priority: round}
				}
				apply(submit(jobs...))
			}
			claim := claimCmd(fsm.Claim{WorkerID: "w", Max: 1, LeaseTTL: int64(time.Hour), Fair: bc.fair})
			for range 9000 { // 9,000 keys at their limit, held for the whole run
				apply(claim)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				j := apply(claim)[0].Jobs
				if len(j) != 1 {
					b.Fatalf("claimed %d jobs", len(j))
				}
				// The job is done and its key gets another, so the run never
				// runs dry.
				apply(report(fsm.Report{JobID: j[0].ID, Lease: j[0].Lease, Success: true}),
					submit(fsm.NewJob{Command: "x", ConcurrencyKey: j[0].ConcurrencyKey}))
			}
		})
	}
}

// newBenchFSM is an FSM over a fresh state file that syncs nothing, closed
// with the benchmark.
func newBenchFSM(b *testing.B) *fsm.FSM {
	st, err := store.Open(filepath.Join(b.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f, err := fsm.New(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkSubmitBatch times the apply of one entry that submits 1,000 new
// jobs (a command, a queue, two env and two metadata entries each) to a
// store already holding 100,000: the apply each replica runs for a batch
// submit. The entries are encoded before the timer starts; each iteration
// applies the next one, so the store grows by 1,000 jobs per iteration. It
// reports ns/job, cpu-ns/job (the process's user and system time, the
// garbage collector's included), allocs/job and page-B/job (bytes of pages
// the commits wrote); it asserts no speed.
func BenchmarkSubmitBatch(b *testing.B) {
	queues := []string{"default", "etl", "emails"}
	submitBatch(b, func(i int) fsm.NewJob {
		i %= 1000 // every entry the same jobs
		return fsm.NewJob{Command: fmt.Sprintf("/usr/local/bin/report --customer %d --format pdf", i),
			Queue: queues[i%len(queues)], MaxAttempts: 3,
			Env:      map[string]string{"REPORT_FORMAT": "pdf", "REGION": "eu-west-1"},
			Metadata: map[string]string{"source": "api", "customer": fmt.Sprint(i)},
			Backoff:  store.Backoff{Base: int64(time.Second), Max: int64(time.Hour), Jitter: 0.3}}
	})
}

// BenchmarkSubmitBatchMetadata is BenchmarkSubmitBatch of the jobs of
// workron bench's submit_batch_metadata (internal/tools/bench), the search
// index's worst case: typed jobs of 4 queues, 4 types and 64 concurrency
// keys, each with metadata customer, order and request of values no other
// job has (6 lists a job, 3 of them a term new to its epoch). Entry i's
// jobs have values of their own too.
func BenchmarkSubmitBatchMetadata(b *testing.B) {
	submitBatch(b, func(i int) fsm.NewJob {
		n := strconv.Itoa(i)
		return fsm.NewJob{Queue: "bench-meta-q" + strconv.Itoa(i%4), Type: "bench-meta-" + strconv.Itoa(i%4),
			ConcurrencyKey: "key-" + strconv.Itoa(i%64), MaxAttempts: 3,
			Metadata: map[string]string{"customer": "crun-" + n, "order": "orun-" + n, "request": "rrun-" + n}}
	})
}

// submitBatch is BenchmarkSubmitBatch of the jobs job(i) makes, i counting
// on over the entries.
func submitBatch(b *testing.B, job func(i int) fsm.NewJob) {
	st, err := store.Open(filepath.Join(b.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	fillStore(b, st, 100000)
	f, err := fsm.New(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	const per = 1000
	var logs []*raft.Log
	for i := range b.N {
		jobs := make([]fsm.NewJob, per)
		for k := range jobs {
			jobs[k] = job(i*per + k)
		}
		index := uint64(1_000_000 + i)
		data, err := fsm.Encode(&fsm.Entry{Now: t0.UnixNano() + int64(i), Cmds: []fsm.Cmd{submit(jobs...)}})
		if err != nil {
			b.Fatal(err)
		}
		logs = append(logs, &raft.Log{Index: index, Type: raft.LogCommand, Data: data})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	written, cpu := st.BytesWritten(), cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range logs {
		res := f.ApplyBatch(logs[i : i+1])[0].([]fsm.Result)[0]
		if res.Err != nil || len(res.Jobs) != per {
			b.Fatalf("submit: %d jobs, %v", len(res.Jobs), res.Err)
		}
	}
	b.StopTimer()
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/per, "ns/job")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/per, "cpu-ns/job")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/per, "allocs/job")
	b.ReportMetric(float64(st.BytesWritten()-written)/float64(b.N)/per, "page-B/job")
}
