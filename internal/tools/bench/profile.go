package bench

import (
	"context"
	"math"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// phase measures one timed phase: wall time, CPU time, heap allocations,
// the leader's Raft entries, commands and term, and (with --cpuprofile) a
// CPU profile.
type phase struct {
	b      *bencher
	leader string
	start  time.Time
	cpu    time.Duration
	raft   [3]float64
	stages stageReading
	allocs uint64
	gc     gcReading
}

func (b *bencher) startPhase(ctx context.Context, name, leader string) *phase {
	p := &phase{b: b, leader: leader, raft: b.raftCounters(ctx, leader), stages: b.stageSums(ctx, leader)}
	if err := b.startProfile(name); err != nil {
		b.progress("bench: cpu profile: %v", err)
	}
	p.start, p.cpu, p.allocs, p.gc = time.Now(), cpuTime(), heapAllocs(), readGC()
	return p
}

// end stops the phase at t (zero: now), fills the figure's timing and
// counters, and returns the phase's length.
func (p *phase) end(ctx context.Context, t time.Time, fg *Figure) time.Duration {
	if t.IsZero() {
		t = time.Now()
	}
	p.b.stopProfile()
	fg.CPUCores = (cpuTime() - p.cpu).Seconds() / time.Since(p.start).Seconds()
	fg.Allocs = float64(heapAllocs() - p.allocs)
	fg.Load1 = loadAverage()
	r := p.b.raftCounters(ctx, p.leader)
	gc := readGC()
	fg.GCCycles, fg.GCPauseMaxMS = float64(gc.cycles-p.gc.cycles), gcPauseMax(p.gc, gc)
	stages := p.b.stageSums(ctx, p.leader)
	fg.StagesMS, fg.HandedOff = stageMeans(p.stages, stages), handedOffDuring(p.stages, stages)
	fg.StagesP99MS, fg.StagesMaxMS = stageTails(p.stages, stages)
	fg.Entries, fg.Elections = r[0]-p.raft[0], r[2]-p.raft[2]
	if fg.Entries > 0 {
		fg.CmdsPerEntry = (r[1] - p.raft[1]) / fg.Entries
	}
	d := t.Sub(p.start)
	fg.Seconds = d.Seconds()
	return d
}

// cpuTime is the CPU time this process has used: with an in-process
// cluster, the servers' and the bench's together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAllocs counts the heap objects this process has allocated: with an
// in-process cluster, the servers' and the bench's together.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// gcReading is this process's collections and its histogram of their
// stop-the-world pauses, as runtime/metrics counts them.
type gcReading struct {
	cycles uint64
	pauses *metrics.Float64Histogram
}

func readGC() gcReading {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(s)
	r := gcReading{}
	if s[0].Value.Kind() == metrics.KindUint64 {
		r.cycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		r.pauses = s[1].Value.Float64Histogram()
	}
	return r
}

// gcPauseMax is the upper bound (ms) of the highest pause bucket that
// grew between two readings; 0 when none did.
func gcPauseMax(before, after gcReading) float64 {
	if before.pauses == nil || after.pauses == nil || len(before.pauses.Counts) != len(after.pauses.Counts) {
		return 0
	}
	for i := len(after.pauses.Counts) - 1; i >= 0; i-- {
		if after.pauses.Counts[i] > before.pauses.Counts[i] {
			bound := after.pauses.Buckets[i+1]
			if math.IsInf(bound, 1) {
				bound = after.pauses.Buckets[i] // the top bucket: its lower bound
			}
			return math.Round(bound*1e6) / 1e3
		}
	}
	return 0
}

// loadAverage is the host's one-minute load average (0 where unknown): a
// busy host makes every figure here worse.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(data), " ")
	v, _ := strconv.ParseFloat(first, 64)
	return v
}

// startProfile starts --cpuprofile for a phase: FILE when one scenario
// runs, FILE.PHASE when several do.
func (b *bencher) startProfile(name string) error {
	path := b.profile
	switch {
	case path == "" || b.profileOnly != "" && name != b.profileOnly:
		return nil
	case b.profileOnly == "":
		path += "." + name
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	b.profiling = f
	return nil
}

func (b *bencher) stopProfile() {
	if b.profiling != nil {
		pprof.StopCPUProfile()
		b.profiling.Close()
		b.profiling = nil
	}
}
