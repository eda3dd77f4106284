package raftnode

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Where a proposed entry's time goes, stage by stage, on the leader that
// proposed it. The leader writes an entry to its own log and then
// replicates it (hashicorp/raft's dispatchLogs wakes the replicators once
// its write returns), and the entry commits once a follower has answered
// too. Each stage is what the entry waited for beyond the one before:
//
//	queue          a command waits in the proposer's queue for an entry
//	dispatch       raft.Apply until Raft's leader loop takes the entry
//	leader_write   the leader's log write (a bbolt commit, fsync'd)
//	replicate      the leader's write done until the first follower
//	               answers the AppendEntries holding the entry (the
//	               network, and the follower's own log write)
//	commit_notice  the later of the two (the entry is committed) until
//	               the state machine starts applying it
//	apply          the state machine's apply of the batch holding it
//	reply          the apply done until the proposer has the results
//
// The tracer keeps a small record per entry, keyed by index, filled in by
// the log store (tracedLogs), the transport (tracedTransport) and the
// state machine (timedFSM), and observes the stages when the proposer's
// future returns. It also times every log write of this node (on a
// follower: the follower's write) and every AppendEntries round trip it
// sends as leader.

// Stage names, in order; the label values of the stage histograms.
var stageNames = [...]string{"queue", "dispatch", "leader_write", "replicate", "commit_notice", "apply", "reply"}

// StageNames lists the stages of StageStats.Stages in order.
func StageNames() []string { return stageNames[:] }

const (
	stageQueue = iota
	stageDispatch
	stageLeaderWrite
	stageReplicate
	stageCommitNotice
	stageApply
	stageReply
	numStages
)

// stageBounds are seconds.
var stageBounds = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1}

// maxTraces bounds the entries traced at once: the leader's entries in
// flight (MaxInflight, at most 1024) and a margin.
const maxTraces = 2048

// entryTrace is what the tracer learns of one entry.
type entryTrace struct {
	index                    uint64
	appended, written, acked time.Time
	applyStart, applyEnd     time.Time
}

type tracer struct {
	// proposing counts the entries this node handed to Raft and awaits:
	// while 0 (a follower), log writes are timed but not traced.
	proposing atomic.Int64

	mu     sync.Mutex
	traces []*entryTrace // by index, ascending

	stages    [numStages]*Histogram
	logWrite  *Histogram // every log write of this node
	appendRPC *Histogram // every AppendEntries round trip this node sent
}

func newTracer() *tracer {
	t := &tracer{logWrite: newHistogram(stageBounds), appendRPC: newHistogram(stageBounds)}
	for i := range t.stages {
		t.stages[i] = newHistogram(stageBounds)
	}
	return t
}

// writing notes the start of a log write of logs.
func (t *tracer) writing(logs []*raft.Log) {
	if t.proposing.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range logs {
		if l.Type != raft.LogCommand || l.AppendedAt.IsZero() {
			continue
		}
		if n := len(t.traces); n > 0 && t.traces[n-1].index >= l.Index {
			t.traces = t.traces[:0] // a new term rewrote the log: start over
		}
		if len(t.traces) == maxTraces {
			t.traces = append(t.traces[:0], t.traces[1:]...)
		}
		t.traces = append(t.traces, &entryTrace{index: l.Index, appended: l.AppendedAt})
	}
}

// stored notes the end of a log write of logs that began at start.
func (t *tracer) stored(logs []*raft.Log, start, end time.Time) {
	t.logWrite.Observe(end.Sub(start).Seconds())
	t.eachOf(logs, func(e *entryTrace) { e.written = end })
}

// eachOf calls fn, under the lock, with the trace of each of logs that
// has one; on a node that proposes nothing, with none.
func (t *tracer) eachOf(logs []*raft.Log, fn func(*entryTrace)) {
	if t.proposing.Load() == 0 || len(logs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	first, last := logs[0].Index, logs[len(logs)-1].Index
	for _, e := range t.traces {
		if e.index > last {
			break
		}
		if e.index >= first {
			fn(e)
		}
	}
}

// acked notes a follower's answer covering the entries up to last.
func (t *tracer) acked(last uint64, at time.Time) {
	if t.proposing.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.traces {
		if e.index > last {
			break
		}
		if e.acked.IsZero() {
			e.acked = at
		}
	}
}

// applied notes the state machine's apply of logs.
func (t *tracer) applied(logs []*raft.Log, start, end time.Time) {
	t.eachOf(logs, func(e *entryTrace) { e.applyStart, e.applyEnd = start, end })
}

// done observes the stages of the entry at index, proposed at call (the
// raft.Apply) and answered now, and forgets it and every older one.
func (t *tracer) done(index uint64, call, now time.Time) {
	t.mu.Lock()
	var e *entryTrace
	k := 0
	for k < len(t.traces) && t.traces[k].index <= index {
		if t.traces[k].index == index {
			e = t.traces[k]
		}
		k++
	}
	t.traces = append(t.traces[:0], t.traces[k:]...)
	t.mu.Unlock()
	if e == nil || e.written.IsZero() || e.applyEnd.IsZero() {
		return
	}
	// Committed once written here and answered by a follower, whichever
	// came last; a cluster of one commits once written.
	committed := e.written
	if e.acked.After(committed) {
		committed = e.acked
	}
	t.observe(stageDispatch, e.appended.Sub(call))
	t.observe(stageLeaderWrite, e.written.Sub(e.appended))
	t.observe(stageReplicate, committed.Sub(e.written))
	t.observe(stageCommitNotice, e.applyStart.Sub(committed))
	t.observe(stageApply, e.applyEnd.Sub(e.applyStart))
	t.observe(stageReply, now.Sub(e.applyEnd))
}

func (t *tracer) observe(stage int, d time.Duration) {
	t.stages[stage].Observe(max(d, 0).Seconds())
}

// tracedLogs times the log writes below it.
type tracedLogs struct {
	raft.LogStore
	t *tracer
}

func (s tracedLogs) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

func (s tracedLogs) StoreLogs(logs []*raft.Log) error {
	s.t.writing(logs)
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	if err == nil {
		s.t.stored(logs, start, time.Now())
	}
	return err
}

// StageStats are the histograms of where proposed entries' time goes (see
// stageNames), with the log writes and AppendEntries round trips.
type StageStats struct {
	// Stages holds one histogram per stage name, in seconds.
	Stages map[string]HistogramSnapshot
	// LogWrite is every write to this node's Raft log, in seconds.
	LogWrite HistogramSnapshot
	// AppendRPC is every AppendEntries round trip this node sent as
	// leader (to one follower: the network and its log write), in seconds.
	AppendRPC HistogramSnapshot
}

func (t *tracer) stats() StageStats {
	s := StageStats{Stages: make(map[string]HistogramSnapshot, numStages), LogWrite: t.logWrite.snapshot(), AppendRPC: t.appendRPC.snapshot()}
	for i, name := range stageNames {
		s.Stages[name] = t.stages[i].snapshot()
	}
	return s
}

// tracedTransport is the transport with the AppendEntries round trips
// timed and their answers noted (tracer.acked).
type tracedTransport struct {
	serialHeartbeats
	t *tracer
}

func (tt tracedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	start := time.Now()
	err := tt.serialHeartbeats.AppendEntries(id, target, args, resp)
	if err == nil {
		tt.answered(start, args, resp)
	}
	return err
}

func (tt tracedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := tt.serialHeartbeats.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	tp := &tracedPipeline{AppendPipeline: p, tt: tt, out: make(chan raft.AppendFuture), stop: make(chan struct{})}
	go tp.relay()
	return tp, nil
}

// answered notes a follower's answer to args, sent at start.
func (tt tracedTransport) answered(start time.Time, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	now := time.Now()
	if len(args.Entries) == 0 {
		return // a heartbeat
	}
	tt.t.appendRPC.Observe(now.Sub(start).Seconds())
	if resp.Success {
		tt.t.acked(args.Entries[len(args.Entries)-1].Index, now)
	}
}

// tracedPipeline passes each answered AppendEntries on to Raft after
// noting it, one at a time (out is unbuffered), so the transport's bound
// on the RPCs in flight stays as it was.
type tracedPipeline struct {
	raft.AppendPipeline
	tt       tracedTransport
	out      chan raft.AppendFuture
	stop     chan struct{}
	stopOnce sync.Once
}

func (p *tracedPipeline) relay() {
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil {
				p.tt.answered(f.Start(), f.Request(), f.Response())
			}
			select {
			case p.out <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

func (p *tracedPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *tracedPipeline) Close() error {
	p.stopOnce.Do(func() { close(p.stop) })
	return p.AppendPipeline.Close()
}
