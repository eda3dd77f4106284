// Package gctune sets the Go garbage collector's target of a Workron node
// process so that the heap grows by at least a fixed amount between
// collections.
//
// Go's own rule (GOGC=100) lets the heap grow by as much as is live before
// the next collection. A node keeps a small live heap but allocates a great
// deal per Raft entry (bbolt builds every B+tree node a transaction changes
// on the heap), so under that rule it collected every few hundred
// milliseconds, and each mark phase took CPU from the commit path of its
// moment. With a floor on the growth, a small heap is collected as often as
// its allocation fills the floor; a heap larger than the floor follows Go's
// rule unchanged, so memory never grows by more than max(live, floor).
//
// The package owns that one setting. It never starts a goroutine (it runs
// after each collection, on the runtime's finalizer goroutine) and never
// overrides GOGC given in the environment.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// goDefault is Go's own GOGC.
const goDefault = 100

// heapMinimum is the runtime's least heap goal at GOGC=100 (4 MiB); it
// scales with GOGC, so the percent for a heap smaller than it is capped to
// keep that minimum at minGrowth.
const heapMinimum = 4 << 20

// Percent is the GOGC that lets a heap of live bytes grow by at least
// minGrowth bytes: Go's 100 when that already does, more otherwise.
func Percent(live, minGrowth uint64) int {
	most := minGrowth * goDefault / heapMinimum
	if live < heapMinimum || most < goDefault {
		return int(max(most, goDefault))
	}
	p := (minGrowth*goDefault + live - 1) / live
	return int(min(max(p, goDefault), most))
}

// tuner re-targets the collector after each collection.
type tuner struct {
	minGrowth uint64
	live      func() uint64 // the live heap the last collection found
	set       func(int) int // debug.SetGCPercent
	last      int           // the percent set last; 0 before the first
}

// sentinel is an object only the tuner references through a finalizer:
// the runtime runs it once the next collection finds it unreachable.
type sentinel struct{ _ [16]byte }

// arm makes the next collection call afterGC.
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) { t.afterGC() })
}

func (t *tuner) afterGC() {
	if p := Percent(t.live(), t.minGrowth); p != t.last {
		t.set(p)
		t.last = p
	}
	t.arm()
}

var once sync.Once

// Start makes this process's collector let the heap grow by at least
// minGrowth bytes between collections, from now until the process ends.
// It does nothing when minGrowth is 0 or the environment sets GOGC (the
// operator's choice), and only the first call in a process counts: the
// setting is the process's, and `workron bench` starts several nodes in one.
func Start(minGrowth uint64) {
	if minGrowth == 0 || os.Getenv("GOGC") != "" {
		return
	}
	once.Do(func() {
		t := &tuner{minGrowth: minGrowth, live: liveHeap, set: debug.SetGCPercent}
		t.afterGC() // target the heap as it is now, then after each collection
	})
}

// liveHeap reads the heap the last collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
