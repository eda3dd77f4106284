//go:build unix

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// The faults, by name (the --faults flag).
const (
	FaultKillLeader        = "kill-leader"        // SIGKILL the leader, restart it
	FaultKillFollower      = "kill-follower"      // SIGKILL a follower, restart it
	FaultKillAll           = "kill-all"           // SIGKILL every node at once, restart them
	FaultPauseLeader       = "pause-leader"       // SIGSTOP the leader, SIGCONT it after an election
	FaultPauseFollower     = "pause-follower"     // SIGSTOP a follower
	FaultPartitionLeader   = "partition-leader"   // cut the leader off the other nodes; clients still reach it
	FaultPartitionMinority = "partition-minority" // cut a random minority off the rest; clients reach both sides
	FaultPartitionBridge   = "partition-bridge"   // two nodes cannot talk, a third talks to both
	FaultSlowDisk          = "slow-disk"          // restart a node with --raft-fsync-delay for a while
	FaultClockJump         = "clock-jump"         // restart a node with --clock-offset for a while
	FaultKillWorker        = "kill-worker"        // SIGKILL a real worker process mid-job, restart it
	FaultWorkerNet         = "worker-net"         // cut a worker (virtual or real) off the nodes
)

// AllFaults lists every fault.
var AllFaults = []string{FaultKillLeader, FaultKillFollower, FaultKillAll, FaultPauseLeader, FaultPauseFollower,
	FaultPartitionLeader, FaultPartitionMinority, FaultPartitionBridge, FaultSlowDisk, FaultClockJump,
	FaultKillWorker, FaultWorkerNet}

var workerFaults = []string{FaultKillWorker, FaultWorkerNet}

// networkFaults need namespaces.
var networkFaults = []string{FaultPartitionLeader, FaultPartitionMinority, FaultPartitionBridge}

// clockOffsets are the jumps FaultClockJump applies.
var clockOffsets = []time.Duration{-time.Hour, -10 * time.Minute, 10 * time.Minute, time.Hour}

// injector injects faults and heals them.
type injector struct {
	c      *cluster
	l      *load
	logf   func(string, ...any)
	netOK  bool
	nodeMu []sync.Mutex // one lifecycle operation per node at a time

	mu     sync.Mutex
	counts map[string]int
	events []string
	errs   []string
	sticky sync.WaitGroup
	// jumps are the spans (Unix nanoseconds) from a clock jump's start to
	// the restart that ended it.
	jumps [][2]int64
}

func newInjector(c *cluster, l *load, netOK bool, logf func(string, ...any)) *injector {
	return &injector{c: c, l: l, logf: logf, netOK: netOK, nodeMu: make([]sync.Mutex, len(c.nodes)), counts: make(map[string]int)}
}

func (in *injector) event(kind, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	in.mu.Lock()
	in.counts[kind]++
	in.events = append(in.events, time.Now().Format("15:04:05.000")+" "+kind+": "+msg)
	in.mu.Unlock()
	in.logf("fault %s: %s", kind, msg)
}

func (in *injector) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	in.mu.Lock()
	in.errs = append(in.errs, msg)
	in.mu.Unlock()
	in.logf("fault error: %s", msg)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// run injects faults of the given kinds, one after another (node faults in
// one loop, worker faults in another), until ctx ends.
func (in *injector) run(ctx context.Context, kinds []string, seed uint64) {
	var nodeKinds, workerKinds []string
	for _, k := range kinds {
		if slices.Contains(workerFaults, k) {
			workerKinds = append(workerKinds, k)
		} else {
			nodeKinds = append(nodeKinds, k)
		}
	}
	var wg sync.WaitGroup
	loop := func(kinds []string, stream uint64) {
		if len(kinds) == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, stream))
		for ctx.Err() == nil {
			sleep(ctx, between(rng, 500*time.Millisecond, 2500*time.Millisecond))
			if ctx.Err() != nil {
				return
			}
			in.inject(ctx, kinds[rng.IntN(len(kinds))], rng)
		}
	}
	wg.Go(func() { loop(nodeKinds, 10) })
	wg.Go(func() { loop(workerKinds, 11) })
	wg.Wait()
}

func (in *injector) inject(ctx context.Context, kind string, rng *rand.Rand) {
	switch kind {
	case FaultKillLeader, FaultPauseLeader, FaultPartitionLeader:
		l := in.c.leader(ctx)
		if l == nil {
			return // no stable leader right now: try another fault later
		}
		switch kind {
		case FaultKillLeader:
			in.killNode(ctx, l, between(rng, 300*time.Millisecond, 3*time.Second), kind)
		case FaultPauseLeader:
			in.pauseNode(ctx, l, between(rng, time.Second, 4*time.Second), kind)
		default:
			var rest []int
			for _, n := range in.c.nodes {
				if n != l {
					rest = append(rest, n.i)
				}
			}
			in.partition(ctx, kind, []int{l.i}, rest, between(rng, time.Second, 5*time.Second))
		}
	case FaultKillFollower, FaultPauseFollower:
		n := in.follower(ctx, rng)
		if n == nil {
			return
		}
		if kind == FaultKillFollower {
			in.killNode(ctx, n, between(rng, 300*time.Millisecond, 3*time.Second), kind)
		} else {
			in.pauseNode(ctx, n, between(rng, time.Second, 4*time.Second), kind)
		}
	case FaultKillAll:
		in.killAll(ctx, between(rng, 300*time.Millisecond, 2*time.Second))
	case FaultPartitionMinority:
		perm := rng.Perm(len(in.c.nodes))
		k := (len(in.c.nodes) - 1) / 2
		in.partition(ctx, kind, perm[:k], perm[k:], between(rng, time.Second, 5*time.Second))
	case FaultPartitionBridge:
		perm := rng.Perm(len(in.c.nodes))
		in.partition(ctx, kind, perm[:1], perm[1:2], between(rng, time.Second, 5*time.Second))
	case FaultSlowDisk:
		n := in.c.nodes[rng.IntN(len(in.c.nodes))]
		d := between(rng, 5*time.Millisecond, 50*time.Millisecond).Round(time.Millisecond)
		in.stickyHook(ctx, n, kind, func() { n.fsyncDelay = d }, func() { n.fsyncDelay = 0 },
			fmt.Sprintf("fsync delay %s", d), between(rng, 4*time.Second, 12*time.Second))
	case FaultClockJump:
		n := in.c.nodes[rng.IntN(len(in.c.nodes))]
		off := clockOffsets[rng.IntN(len(clockOffsets))]
		in.stickyHook(ctx, n, kind, func() { n.clockOffset = off }, func() { n.clockOffset = 0 },
			fmt.Sprintf("clock offset %s", off), between(rng, 4*time.Second, 15*time.Second))
	case FaultKillWorker:
		in.killWorker(ctx, rng)
	case FaultWorkerNet:
		in.workerNet(ctx, rng)
	}
}

// follower picks a running, unpaused node that does not lead.
func (in *injector) follower(ctx context.Context, rng *rand.Rand) *node {
	l := in.c.leader(ctx)
	var out []*node
	for _, n := range in.c.nodes {
		if n != l && n.Running() && !n.Paused() {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out[rng.IntN(len(out))]
}

func (in *injector) killNode(ctx context.Context, n *node, down time.Duration, kind string) {
	in.nodeMu[n.i].Lock()
	defer in.nodeMu[n.i].Unlock()
	in.event(kind, "SIGKILL %s, restart after %s", n.Name, down.Round(time.Millisecond))
	n.Kill()
	sleep(ctx, down)
	if err := in.c.startNode(context.Background(), n); err != nil {
		in.fail("restart %s: %v", n.Name, err)
	}
}

func (in *injector) killAll(ctx context.Context, down time.Duration) {
	for i := range in.nodeMu {
		in.nodeMu[i].Lock()
		defer in.nodeMu[i].Unlock()
	}
	in.event(FaultKillAll, "SIGKILL every node, restart after %s", down.Round(time.Millisecond))
	for _, n := range in.c.nodes {
		n.Kill()
	}
	sleep(ctx, down)
	if err := in.c.startNodes(context.Background(), in.c.nodes...); err != nil {
		in.fail("restart: %v", err)
	}
}

func (in *injector) pauseNode(ctx context.Context, n *node, d time.Duration, kind string) {
	in.nodeMu[n.i].Lock()
	defer in.nodeMu[n.i].Unlock()
	if !n.Pause() {
		return
	}
	in.event(kind, "SIGSTOP %s for %s", n.Name, d.Round(time.Millisecond))
	sleep(ctx, d)
	n.Resume()
}

// partition cuts every node of a from every node of b for d.
func (in *injector) partition(ctx context.Context, kind string, a, b []int, d time.Duration) {
	names := func(ix []int) string {
		var s []string
		for _, i := range ix {
			s = append(s, in.c.nodes[i].Name)
		}
		return strings.Join(s, ",")
	}
	in.event(kind, "cut {%s} from {%s} for %s", names(a), names(b), d.Round(time.Millisecond))
	for _, i := range a {
		for _, k := range b {
			if err := in.c.net.block(nodeEP(i), nodeEP(k)); err != nil {
				in.fail("partition: %v", err)
			}
		}
	}
	sleep(ctx, d)
	if err := in.c.net.heal(); err != nil {
		in.fail("heal partition: %v", err)
	}
}

// stickyHook restarts n with a test hook set, and again without it after
// hold, in the background: other faults go on meanwhile.
func (in *injector) stickyHook(ctx context.Context, n *node, kind string, set, unset func(), what string, hold time.Duration) {
	if !in.nodeMu[n.i].TryLock() {
		return
	}
	n.mu.Lock()
	busy := n.clockOffset != 0 || n.fsyncDelay != 0
	if !busy {
		set()
	}
	n.mu.Unlock()
	if busy {
		in.nodeMu[n.i].Unlock()
		return
	}
	in.event(kind, "restart %s with %s for %s", n.Name, what, hold.Round(time.Millisecond))
	began := time.Now().UnixNano()
	if err := in.c.restartNode(context.Background(), n); err != nil {
		in.fail("restart %s: %v", n.Name, err)
	}
	in.nodeMu[n.i].Unlock()
	in.sticky.Go(func() {
		sleep(ctx, hold)
		in.nodeMu[n.i].Lock()
		defer in.nodeMu[n.i].Unlock()
		n.mu.Lock()
		unset()
		n.mu.Unlock()
		in.logf("fault %s: restart %s without %s", kind, n.Name, what)
		if err := in.c.restartNode(context.Background(), n); err != nil {
			in.fail("restart %s: %v", n.Name, err)
		}
		if kind == FaultClockJump {
			in.mu.Lock()
			in.jumps = append(in.jumps, [2]int64{began, time.Now().UnixNano()})
			in.mu.Unlock()
		}
	})
}

func (in *injector) killWorker(ctx context.Context, rng *rand.Rand) {
	if len(in.c.workers) == 0 {
		return
	}
	i := rng.IntN(len(in.c.workers))
	w := in.c.workers[i]
	down := between(rng, 300*time.Millisecond, 3*time.Second)
	in.event(FaultKillWorker, "SIGKILL %s %s, restart after %s", in.c.workerKind(i), w.Name, down.Round(time.Millisecond))
	w.Kill()
	sleep(ctx, down)
	if err := in.c.startWorker(i); err != nil {
		in.fail("restart worker %s: %v", w.Name, err)
	}
}

func (in *injector) workerNet(ctx context.Context, rng *rand.Rand) {
	d := between(rng, time.Second, 5*time.Second)
	if in.netOK && len(in.c.workers) > 0 && rng.IntN(2) == 0 {
		i := rng.IntN(len(in.c.workers))
		in.event(FaultWorkerNet, "cut %s %s off every node for %s", in.c.workerKind(i), in.c.workers[i].Name, d.Round(time.Millisecond))
		for k := range in.c.nodes {
			if err := in.c.net.block(workerEP(i), nodeEP(k)); err != nil {
				in.fail("worker net: %v", err)
			}
		}
		sleep(ctx, d)
		if err := in.c.net.heal(); err != nil {
			in.fail("heal worker net: %v", err)
		}
		return
	}
	if len(in.l.vworkers) == 0 {
		return
	}
	w := in.l.vworkers[rng.IntN(len(in.l.vworkers))]
	in.event(FaultWorkerNet, "cut virtual worker %s off the network for %s", w.id, d.Round(time.Millisecond))
	w.tr.down.Store(true)
	sleep(ctx, d)
	w.tr.down.Store(false)
}

// healAll undoes every fault: links, paused and dead processes, hooks.
func (in *injector) healAll(ctx context.Context) {
	in.sticky.Wait()
	if err := in.c.net.heal(); err != nil {
		in.fail("heal: %v", err)
	}
	for _, w := range in.l.vworkers {
		w.tr.down.Store(false)
	}
	for _, n := range in.c.nodes {
		in.nodeMu[n.i].Lock()
		n.Resume()
		if !n.Running() {
			if err := in.c.startNode(ctx, n); err != nil {
				in.fail("heal: start %s: %v", n.Name, err)
			}
		}
		in.nodeMu[n.i].Unlock()
	}
	for i, w := range in.c.workers {
		if !w.Running() {
			if err := in.c.startWorker(i); err != nil {
				in.fail("heal: start worker %s: %v", w.Name, err)
			}
		}
	}
}

// clockJumps returns the clock jumps' spans.
func (in *injector) clockJumps() [][2]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.jumps)
}

// summary returns the counts by kind, the total and the errors.
func (in *injector) summary() (map[string]int, int, []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]int, len(in.counts))
	total := 0
	for k, v := range in.counts {
		out[k] = v
		total += v
	}
	return out, total, append([]string(nil), in.errs...)
}
