package fsm

import (
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"

	"github.com/workron/workron/store"
)

// BenchmarkIndexGC builds the index of a backlog of 200,000 pending jobs
// (three queues; a quarter with one of 1,000 concurrency keys, a tenth
// asking for resources, one in 20 delayed, one in 50 named by its
// submitter) and times a forced full collection with it live. It reports
// what the backlog costs the collector per job, machine-independently:
// scan-B/job, the heap it must scan (runtime/metrics /gc/scan/heap:bytes),
// and live-B/job, the heap it keeps (/gc/heap/live:bytes). It asserts no
// speed.
func BenchmarkIndexGC(b *testing.B) {
	const n = 200_000
	scan0, live0 := heapAfterGC()
	x := newIndex()
	queues := []string{DefaultQueue, "etl", "emails"}
	for i := range n {
		seq := uint64(i + 1)
		h := &store.JobHead{ID: jobID(seq), Seq: seq, Status: store.StatusPending, Queue: queues[i%3], Priority: i % 3, RunAt: int64(i)}
		if i%50 == 0 {
			h.ID = "order-" + strconv.Itoa(i)
		}
		if i%4 == 0 {
			h.Key = "tenant-" + strconv.Itoa(i%1000)
		}
		if i%10 == 0 {
			h.Resources, h.Tags = store.Resources{Slots: 1 + i%2}, []string{"gpu"}
		}
		if i%20 == 0 {
			h.RunAt = 2 * n
		}
		x.addPending(h, n)
	}
	scan1, live1 := heapAfterGC()
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(x)
	b.ReportMetric(float64(scan1-scan0)/n, "scan-B/job")
	b.ReportMetric(float64(live1-live0)/n, "live-B/job")
}

// heapAfterGC collects and returns the scannable and the live heap.
func heapAfterGC() (scan, live uint64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}
