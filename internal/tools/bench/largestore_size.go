package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/testkit/ports"
	"github.com/workron/workron/internal/testkit/proccluster"
)

// What large_store measures beside claim → done: submits and filtered
// lists on the empty and the full store, a snapshot of the full store, a
// node joining it, and the disk it may use.
const (
	// largeListJobs are pending jobs in a queue of their own, submitted
	// before anything else, that the filtered lists look for (a quarter in
	// each of 4 regions, metadata `region`).
	largeListJobs = 1000
	// largeListRuns is the GETs of each list, one after another.
	largeListRuns = 100
	// largeBytesPerJob is what each node's data dir is reckoned to hold a
	// job at most, for the disk check before the run: the state file (460
	// to 640 bytes a job), its Raft log (up to 150) and one snapshot (a
	// copy of the state file).
	largeBytesPerJob = 1600
	// largeSnapshotInterval is how often a node started to take a snapshot
	// checks its threshold (at a random time between this and twice this).
	largeSnapshotInterval = "1s"
	// largeListAll is the most finished jobs the last check lists one by
	// one (GET /jobs, 1,000 a page): past it, it checks the leader's
	// counts of the queue and a sample of jobs read one by one, as for
	// any queue, and what the bench saw of every job (claimed once, done
	// once). Listing 10,000,000 jobs takes about 25 minutes here.
	largeListAll = 2_000_000
)

// verifyFill checks the finished jobs on the leader: verifyQueue, without
// the listing past largeListAll jobs.
func (b *bencher) verifyFill(ctx context.Context, leader, queue string, t *tracker) []string {
	t.mu.Lock()
	ids := slices.Clone(t.order)
	t.mu.Unlock()
	if len(ids) <= largeListAll {
		return b.verifyQueue(ctx, leader, queue, wire.StatusDone, t)
	}
	b.progress("bench: large_store: %d finished jobs: checking their count and a sample, not listing each", len(ids))
	return append(b.verifyCounts(ctx, leader, queue, wire.StatusDone, t), b.verifySample(ctx, leader, wire.StatusDone, ids, t)...)
}

// freeBytes is the space unprivileged users may still write in the file
// system holding path.
func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// gb is bytes in GiB, for messages.
func gb(b int64) float64 { return float64(b) / (1 << 30) }

// checkDisk refuses a run whose estimated data dirs would leave less
// than --large-min-free-gb free in dir's file system.
func (b *bencher) checkDisk(dir string) error {
	free, err := freeBytes(dir)
	if err != nil {
		return err
	}
	jobs := int64(b.cfg.LargeJobs + b.cfg.LargePending + 4*b.cfg.Jobs + largeListJobs)
	need := int64(b.cfg.LargeNodes) * jobs * largeBytesPerJob
	if free-need < b.cfg.LargeMinFree {
		return fmt.Errorf("large_store: %d nodes holding %d jobs need about %.1f GiB (%d bytes a job each); %s has %.1f GiB free and --large-min-free-gb %.0f must stay free: lower --large-jobs or --large-nodes",
			b.cfg.LargeNodes, jobs, gb(need), largeBytesPerJob, dir, gb(free), gb(b.cfg.LargeMinFree))
	}
	return nil
}

// watchDisk checks the free space of the cluster's file system every
// second until the returned stop is called; once it falls below floor it
// kills every server process (which stops the data dirs growing) and
// cancels the returned context with the reason.
func (c *procCluster) watchDisk(ctx context.Context, floor int64) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if free, err := freeBytes(c.dir); err == nil && free < floor {
				cancel(fmt.Errorf("large_store: stopped the server processes: %s has %.1f GiB free, under --large-min-free-gb %.0f", c.dir, gb(free), gb(floor)))
				c.Stop(0)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// submitListJobs submits largeListJobs pending jobs to a queue of their
// own, a quarter in each of regions r0–r3, for the filtered lists.
func (b *bencher) submitListJobs(ctx context.Context, leader string) (*tracker, string, error) {
	t, queue := newTracker(), b.queue("large_store_list")
	var errs atomic.Int64
	for r := range 4 {
		job := wire.SubmitRequest{Command: "true", Queue: queue, Metadata: map[string]string{"region": fmt.Sprintf("r%d", r)}}
		b.submitJobs(ctx, leader, job, largeListJobs/4, largeListJobs/4, 1, time.Time{}, t, &errs)
	}
	if got := t.accepted(); got != largeListJobs {
		return nil, "", fmt.Errorf("large_store: %d of %d jobs for the lists accepted", got, largeListJobs)
	}
	return t, queue, nil
}

// listFigures time largeListRuns GETs of the first page of 50 of each
// filtered list, one after another, on the leader (consistent reads);
// each figure is the p95 in ms, named large_store_list_NAME + suffix.
func (b *bencher) listFigures(ctx context.Context, leader, queue, suffix string, jobs int) []Figure {
	lists := []struct{ name, query, what string }{
		{"queue", "queue=" + url.QueryEscape(queue) + "&status=pending", fmt.Sprintf("a queue's %d pending jobs", largeListJobs)},
		{"metadata", "metadata.region=r1", fmt.Sprintf("metadata.region=r1 (%d jobs)", largeListJobs/4)},
		{"done", "status=done", "status=done (every finished job)"},
		{"filter", "filter=" + url.QueryEscape(`status == "pending" and metadata.region == "r9"`), "status == pending and metadata.region == r9 (no job)"},
	}
	var figs []Figure
	for _, l := range lists {
		var errs int64
		var ms []float64
		start := time.Now()
		for range largeListRuns {
			var reply struct {
				Jobs []struct{} `json:"jobs"`
			}
			t := time.Now()
			st, err := b.call(ctx, http.MethodGet, leader+"/jobs?limit=50&"+l.query, nil, &reply)
			if err != nil || st != http.StatusOK {
				errs++
				b.noteError("list "+l.name, st, err)
				continue
			}
			ms = append(ms, float64(time.Since(t).Microseconds())/1000)
		}
		slices.Sort(ms)
		fg := Figure{Figure: "large_store_list_" + l.name + suffix, Unit: "ms p95", Value: percentile(ms, 0.95), Jobs: jobs,
			Seconds: time.Since(start).Seconds(), Clients: 1, Target: "leader", Errors: errs, Load1: loadAverage(),
			Note: fmt.Sprintf("GET /jobs?limit=50&%s: %s; %d requests one after another: p50 %.1f ms, p95 %.1f ms, max %.1f ms",
				l.query, l.what, largeListRuns, percentile(ms, 0.5), percentile(ms, 0.95), percentile(ms, 1))}
		var problems []string
		if errs > 0 {
			problems = append(problems, fmt.Sprintf("%d of %d lists failed", errs, largeListRuns))
		}
		fg.check(problems)
		figs = append(figs, fg)
	}
	return figs
}

// memoryFigure is the largest anonymous memory of any node now (the
// target of issue #32: under 1 GiB), with each node's Go heap.
func (c *procCluster) memoryFigure(ctx context.Context, b *bencher, jobs int) Figure {
	fg := Figure{Figure: "large_store_anon_max", Unit: "MiB", Jobs: jobs, Load1: loadAverage(), Correct: true}
	var each []string
	for _, n := range c.Nodes {
		m := readProcMem(n.Pid())
		fg.Value = max(fg.Value, float64(m.Anon)/(1<<20))
		each = append(each, fmt.Sprintf("%s %.0f MiB anonymous, Go heap in use %.0f MiB, VmRSS %.0f MiB",
			n.Name, float64(m.Anon)/(1<<20), b.heapInUse(ctx, n.URL)/(1<<20), float64(m.RSS)/(1<<20)))
	}
	fg.Note = "the largest RssAnon of the server processes holding the store: " + strings.Join(each, "; ")
	return fg
}

// snapshotTaken is one node's forced snapshot.
type snapshotTaken struct {
	node           string
	seconds, bytes float64
}

// forceSnapshots has every node take a snapshot of the full store in
// turn, the followers first, then the leader: each is stopped, started
// with flags that make Raft snapshot its whole log within a few seconds
// and compact the log behind it, stopped once the snapshot is written,
// and started again with its own flags. The figure is the first node's
// snapshot time (workron_raft_snapshot_duration_seconds: the copy of the
// state file at --snapshot-write-rate-mb, 64 MiB/s unless set); its
// bytes and the other nodes' are in the note. Afterwards any node that
// leads holds a snapshot and no log before it, so a node that joins is
// sent the snapshot.
func (c *procCluster) forceSnapshots(ctx context.Context, b *bencher, jobs int) (Figure, []string) {
	fg := Figure{Figure: "large_store_snapshot", Unit: "s", Jobs: jobs}
	li, _, err := c.leader(ctx, b)
	if err != nil {
		return fg, []string{err.Error()}
	}
	order := make([]*proccluster.Node, 0, len(c.Nodes))
	for i, n := range c.Nodes {
		if i != li {
			order = append(order, n)
		}
	}
	order = append(order, c.Nodes[li])
	var taken []snapshotTaken
	for _, n := range order {
		b.progress("bench: large_store: snapshot of %s", n.Name)
		s, err := c.forceSnapshot(ctx, b, n)
		if err != nil {
			return fg, []string{err.Error()}
		}
		taken = append(taken, s)
	}
	fg.Value, fg.Seconds, fg.Load1 = taken[0].seconds, taken[0].seconds, loadAverage()
	var each []string
	for _, s := range taken {
		each = append(each, fmt.Sprintf("%s %.1f s for %.0f MiB (%.0f MiB/s)", s.node, s.seconds, s.bytes/(1<<20), s.bytes/(1<<20)/max(s.seconds, 1e-3)))
	}
	fg.Note = "one Raft snapshot of the full store (a copy of state.db, paced by --snapshot-write-rate-mb), each node in turn: " + strings.Join(each, "; ")
	return fg, nil
}

// forceSnapshot is one node's turn of forceSnapshots.
func (c *procCluster) forceSnapshot(ctx context.Context, b *bencher, n *proccluster.Node) (snapshotTaken, error) {
	s := snapshotTaken{node: n.Name}
	n.Stop(time.Minute)
	own := slices.Clone(n.Args) // Start(args) replaces them
	args := append(slices.Clone(own), "--snapshot-threshold", "1", "--snapshot-log-ratio", "0",
		"--raft-snapshot-interval", largeSnapshotInterval, "--raft-trailing-logs", "1")
	off, err := n.Start(args...)
	if err == nil {
		err = c.WaitServing(ctx, n, off, 30*time.Minute)
	}
	if err != nil {
		return s, fmt.Errorf("start %s to snapshot: %w", n.Name, err)
	}
	err = poll.True(ctx, 30*time.Minute, 100*time.Millisecond, func() bool {
		return !n.Running() || b.metric(ctx, n.URL, "workron_raft_snapshots_total") >= 1
	})
	s.seconds = b.metric(ctx, n.URL, "workron_raft_snapshot_duration_seconds")
	s.bytes = b.metric(ctx, n.URL, "workron_raft_snapshot_bytes")
	// Stop at once: the next check could take another (the threshold is 1).
	n.Stop(time.Minute)
	if err != nil || s.bytes == 0 {
		return s, fmt.Errorf("%s took no snapshot (running: %v): %v\n%s", n.Name, n.Running(), err, n.Tail(10))
	}
	if off, err = n.Start(own...); err == nil {
		err = c.WaitServing(ctx, n, off, 30*time.Minute)
	}
	if err != nil {
		return s, fmt.Errorf("start %s again: %w", n.Name, err)
	}
	if err := c.caughtUp(ctx, b, n); err != nil {
		return s, err
	}
	if thr := b.metric(ctx, n.URL, "workron_raft_snapshot_threshold"); thr <= 1 {
		return s, fmt.Errorf("%s still snapshots every %.0f entries after it was started again with its own flags", n.Name, thr)
	}
	return s, nil
}

// caughtUp waits until n answers /health 200 and its applied index
// reaches that of the node that leads.
func (c *procCluster) caughtUp(ctx context.Context, b *bencher, n *proccluster.Node) error {
	var applied, want uint64
	err := poll.True(ctx, 30*time.Minute, 50*time.Millisecond, func() bool {
		var h, lh wire.Health
		if st, err := b.call(ctx, http.MethodGet, n.URL+"/health", nil, &h); err != nil || st != http.StatusOK {
			return !n.Running()
		}
		li, _, err := c.leader(ctx, b)
		if err != nil {
			return false
		}
		if _, err := b.call(ctx, http.MethodGet, c.Nodes[li].URL+"/health", nil, &lh); err != nil {
			return false
		}
		applied, want = h.AppliedIndex, lh.AppliedIndex
		return applied >= want && want > 0
	})
	switch {
	case !n.Running():
		return fmt.Errorf("%s exited: %s", n.Name, n.Tail(10))
	case err != nil:
		return fmt.Errorf("%s at applied index %d of the leader's %d: %w", n.Name, applied, want, err)
	}
	return nil
}

// joinFigure starts a new server process with --join, pointed at the
// leader, and times it until it answers /health 200 and its applied
// index reaches the leader's. It is first skipped (the figure says so)
// when two copies of the leader's state file (the snapshot received and
// the state file restored from it) would leave less than
// --large-min-free-gb free. The node is added to the cluster, so it is
// stopped and its data removed with the others.
func (c *procCluster) joinFigure(ctx context.Context, b *bencher, jobs int) (Figure, []string) {
	fg := Figure{Figure: "large_store_join", Unit: "s", Jobs: jobs, Load1: loadAverage()}
	li, _, err := c.leader(ctx, b)
	if err != nil {
		return fg, []string{err.Error()}
	}
	leader := c.Nodes[li]
	state := int64(b.metric(ctx, leader.URL, "workron_store_bytes"))
	free, err := freeBytes(c.dir)
	if err != nil {
		return fg, []string{err.Error()}
	}
	if need := 2*state + state/10; free-need < b.cfg.LargeMinFree {
		fg.Note = fmt.Sprintf("skipped: a new node would write about %.1f GiB (the snapshot and the state file restored from it); %.1f GiB are free and --large-min-free-gb %.0f must stay free",
			gb(need), gb(free), gb(b.cfg.LargeMinFree))
		return fg, nil
	}
	ps, err := ports.Free(2)
	if err != nil {
		return fg, []string{err.Error()}
	}
	id := fmt.Sprintf("n%d", len(c.Nodes)+1)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", ps[0])
	n := &proccluster.Node{URL: "http://" + httpAddr, Data: filepath.Join(c.dir, id)}
	n.Proc = proccluster.Proc{Name: id, Bin: leader.Bin, Log: filepath.Join(c.dir, id+".log"),
		Args: append([]string{"server", "--id", id, "--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ps[1]),
			"--data", n.Data, "--join", leader.URL}, b.procNodeArgs()...)}
	c.Nodes = append(c.Nodes, n)
	snapIndex := uint64(b.metric(ctx, leader.URL, "workron_raft_snapshot_index"))
	start := time.Now()
	off, err := n.Start()
	if err == nil {
		err = c.WaitServing(ctx, n, off, 30*time.Minute)
	}
	if err == nil {
		err = c.caughtUp(ctx, b, n)
	}
	d := time.Since(start)
	fg.Value, fg.Seconds, fg.Load1 = d.Seconds(), d.Seconds(), loadAverage()
	if err != nil {
		return fg, []string{err.Error()}
	}
	_, snaps, _ := dirSize(filepath.Join(n.Data, "snapshots"))
	_, all, _ := dirSize(n.Data)
	how := "the log (no snapshot received)"
	if got := latestSnapshot(n.Data); got > 0 {
		how = fmt.Sprintf("a snapshot at index %d (the leader's newest: %d)", got, snapIndex)
	}
	fg.Note = fmt.Sprintf("%s started with --join %s, caught up with the leader's applied index after %.2f s, through %s: received %.0f MiB of snapshot; its data dir then %.0f MiB",
		id, leader.Name, d.Seconds(), how, float64(snaps)/(1<<20), float64(all)/(1<<20))
	return fg, nil
}
