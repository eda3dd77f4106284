package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// Shape of large_store's fill.
const (
	benchFillClaimers = 8   // workers claiming the retained jobs
	benchFillClaimMax = 256 // jobs per claim: the server's cap
)

// largeStore measures a cluster holding many jobs: --large-nodes `workron
// server` processes (three unless set, as failover starts them) and,
// beside them, an empty store's cluster of as many. It fills the store
// with --large-jobs finished jobs (batch submits; claims of
// benchFillClaimMax each carrying the reports of the claim before) and
// --large-pending pending ones; measures single submits and claim_done on
// both clusters in turns (compareStores) and filtered lists on both
// (largeListJobs jobs of their own in 4 regions); then each node's
// resident and anonymous memory and Go heap, the data directories' size
// per job, how long a follower holding the store takes, once SIGKILLed
// and once stopped cleanly, from its restart to answering /health and
// catching up with the leader's applied index; one snapshot of the full
// store on every node, its time and bytes; and a new node joining, which
// the leader sends that snapshot. It refuses to start, skips the join, or
// stops the servers rather than leave less than --large-min-free-gb free.
//
// Every job is checked: the retained ones claimed once and done once, the
// pending ones never claimed, both as the leader counts them and (up to
// largeListAll finished jobs) lists them.
func (b *bencher) largeStore(ctx context.Context) ([]Figure, error) {
	if err := b.checkDisk(os.TempDir()); err != nil {
		return nil, err
	}
	c, err := b.startProcNodes(ctx, "large_store", b.cfg.LargeNodes)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	ctx, stopWatch := c.watchDisk(ctx, b.cfg.LargeMinFree)
	defer stopWatch()
	pb := b.onNodes(c.URLs())
	defer pb.hc.CloseIdleConnections()
	// The empty store to compare with: a cluster of its own, alive
	// throughout, measured in turns with the full one (the machine's load
	// moves; turns share it).
	ec, err := b.startProcNodes(ctx, "large_store_empty", b.cfg.LargeNodes)
	if err != nil {
		return nil, err
	}
	defer ec.stop()
	eb := b.onNodes(ec.URLs())
	defer eb.hc.CloseIdleConnections()
	li, _, err := c.leader(ctx, pb)
	if err != nil {
		return nil, err
	}
	listT, listQueue, err := pb.submitListJobs(ctx, c.Nodes[li].URL)
	if err != nil {
		return nil, err
	}
	eli, _, err := ec.leader(ctx, eb)
	if err != nil {
		return nil, err
	}
	if _, _, err := eb.submitListJobs(ctx, ec.Nodes[eli].URL); err != nil {
		return nil, err
	}
	rssEmpty := c.rss()
	b.progress("bench: large_store: filling %d finished and %d pending jobs on %d nodes", b.cfg.LargeJobs, b.cfg.LargePending, len(c.Nodes))
	cpu := c.cpu()
	stopSampling := c.sampleMem(ctx)
	fill, fillT, fillQueue, fillOwn := pb.fillDone(ctx, c.Nodes[li].URL, b.cfg.LargeJobs)
	fillPeak := stopSampling()
	fill.Note += fmt.Sprintf("; the server processes used %.2f cores", (c.cpu()-cpu).Seconds()/fill.Seconds)
	if fill.Jobs > largeListAll {
		fill.Note += fmt.Sprintf("; checked by the queue's counts and a sample, not listed one by one (over %d jobs)", largeListAll)
	}
	pendT, pendQueue := newTracker(), pb.queue("large_store_pending")
	var pendErrs atomic.Int64
	pb.submitMany(ctx, c.Nodes[li].URL, pendQueue, b.cfg.LargePending, benchBatchSize, benchBatchClients, time.Time{}, pendT, &pendErrs)

	b.progress("bench: large_store: submits, claim_done and lists, the empty and the full store in turns")
	cmp, err := b.compareStores(ctx, ec, eb, c, pb)
	if err != nil {
		return nil, err
	}
	jobs := largeListJobs + fill.Jobs + pendT.accepted() + cmp.fullJobs
	listsEmpty := eb.listFigures(ctx, ec.Nodes[eli].URL, listQueue, "_empty", largeListJobs+cmp.emptyJobs)
	if li, _, err = c.leader(ctx, pb); err != nil {
		return nil, err
	}
	listsFull := pb.listFigures(ctx, c.Nodes[li].URL, listQueue, "", jobs)
	ec.stop()
	// Each figure of the store is correct if its own problems and the
	// store's checks below find nothing.
	own := map[string][]string{fill.Figure: fillOwn}
	figs := cmp.figs
	for i := range listsFull {
		figs = append(figs, listsEmpty[i], listsFull[i])
	}
	checked := len(figs) // the figures above check themselves
	figs = append(figs, fill)
	figs = append(figs, c.rssFigures(ctx, pb, rssEmpty, fillPeak, jobs)...)
	figs = append(figs, c.memoryFigure(ctx, pb, jobs), pb.snapshotFigure(ctx, c.Nodes[li].URL, jobs))
	disk, problems := c.diskFigure(jobs)
	figs, own[disk.Figure] = append(figs, disk), problems
	for _, crash := range []bool{true, false} {
		b.progress("bench: large_store: restarting a follower (crash: %v)", crash)
		restart, problems := c.restartFigure(ctx, pb, jobs, crash)
		figs, own[restart.Figure] = append(figs, restart), problems
	}
	snap, problems := c.forceSnapshots(ctx, pb, jobs)
	figs, own[snap.Figure] = append(figs, snap), problems
	b.progress("bench: large_store: a node joins")
	join, problems := c.joinFigure(ctx, pb, jobs)
	figs, own[join.Figure] = append(figs, join), problems
	if ctx.Err() != nil {
		return figs, context.Cause(ctx) // printed, unchecked, with the reason
	}

	b.progress("bench: large_store: checking every job")
	if li, _, err = c.leader(ctx, pb); err != nil {
		return nil, err
	}
	leader := c.Nodes[li].URL
	fillProblems := append(fillT.check(true), pb.verifyFill(ctx, leader, fillQueue, fillT)...)
	pendProblems := append(pendT.check(false), pb.verifyQueue(ctx, leader, pendQueue, wire.StatusPending, pendT)...)
	pendProblems = append(pendProblems, listT.check(false)...)
	pendProblems = append(pendProblems, pb.verifyQueue(ctx, leader, listQueue, wire.StatusPending, listT)...)
	if got := pendT.accepted(); got != b.cfg.LargePending {
		pendProblems = append(pendProblems, fmt.Sprintf("%d of %d pending jobs accepted (%d errors)", got, b.cfg.LargePending, pendErrs.Load()))
	}
	for i := checked; i < len(figs); i++ {
		figs[i].check(own[figs[i].Figure], fillProblems, pendProblems)
	}
	return figs, nil
}

// onNodes is a bencher for another cluster, sharing this one's flags and
// run id; it writes no CPU profile (the servers run in other processes).
func (b *bencher) onNodes(urls []string) *bencher {
	nb := newBencher(b.cfg)
	nb.nodes, nb.runID, nb.profile = urls, b.runID, ""
	return nb
}

// fillDone submits n jobs to a queue of its own and has benchFillClaimers
// workers claim and report them done as fast as the cluster goes: batch
// submits of benchBatchSize from benchBatchClients clients while the
// workers claim benchFillClaimMax at a time, each claim carrying the done
// reports of the jobs of the claim before. It returns the figure, the
// jobs, their queue and the problems seen while filling.
func (b *bencher) fillDone(ctx context.Context, leader string, n int) (Figure, *tracker, string, []string) {
	const name = "large_store_fill"
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	runCtx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(n)*time.Millisecond)
	defer cancel()
	left := newCountdown(n, cancel)
	ph := b.startPhase(ctx, name, leader)
	var wg sync.WaitGroup
	for i := range benchFillClaimers {
		id := fmt.Sprintf("bench-%s-fill%d", b.runID, i)
		wg.Go(func() { b.fillWorker(runCtx, leader, id, queue, t, &errs, left.done) })
	}
	if n > 0 {
		b.submitMany(runCtx, leader, queue, n, benchBatchSize, benchBatchClients, time.Time{}, t, &errs)
	} else {
		cancel()
	}
	wg.Wait()
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: benchFillClaimers, Target: "leader", Jobs: n}
	var problems []string
	stop, ok := left.end()
	if !ok && n > 0 {
		problems = append(problems, fmt.Sprintf("timed out with %d of %d jobs not done", left.left.Load(), n))
	}
	d := ph.end(ctx, stop, &fg)
	fg.Value, fg.Errors = float64(n)/d.Seconds(), errs.Load()
	fg.Note = fmt.Sprintf("filling the store: POST /jobs/batch (%d jobs, %d clients) while %d workers claim %d at a time, each claim carrying the previous claim's done reports",
		benchBatchSize, benchBatchClients, benchFillClaimers, benchFillClaimMax)
	if got := t.accepted(); got != n {
		problems = append(problems, fmt.Sprintf("%d of %d submits accepted", got, n))
	}
	return fg, t, queue, problems
}

// fillWorker claims up to benchFillClaimMax jobs at a time, each claim
// carrying the done reports of the claim before, until ctx ends.
func (b *bencher) fillWorker(ctx context.Context, base, id, queue string, t *tracker, errs *atomic.Int64, onDone func()) {
	var pending []jobRef
	for ctx.Err() == nil {
		req := wire.ClaimRequest{WorkerID: id, Queues: []string{queue}, Max: benchFillClaimMax, Wait: "1s"}
		if len(pending) > 0 {
			req.Wait = "100ms" // the reports' answers wait for the claim
		}
		for _, j := range pending {
			req.Reports = append(req.Reports, wire.BatchReport{JobID: j.ID, Status: wire.StatusDone, ReportRequest: wire.ReportRequest{Lease: j.Lease}})
		}
		var reply struct {
			Jobs    []jobRef                 `json:"jobs"`
			Reports []wire.BatchReportResult `json:"reports"`
		}
		st, err := b.do(ctx, http.MethodPost, base+"/jobs/claim", mustJSON(req), &reply, errs)
		at := time.Now()
		if classify(st, err) != outOK || len(reply.Reports) != len(pending) {
			if ctx.Err() != nil {
				break
			}
			errs.Add(1)
			b.noteError("fill claim", st, err)
			sleepCtx(ctx, 20*time.Millisecond)
			continue // a repeated report for the same lease is answered like the first
		}
		var retry []jobRef
		for i, r := range reply.Reports {
			switch {
			case r.Status == wire.StatusDone:
				t.done(pending[i].ID, pending[i].Lease)
				onDone()
			case wire.RetryReport(r.Code):
				retry = append(retry, pending[i])
			default:
				errs.Add(1)
				b.noteError("report done", http.StatusConflict, fmt.Errorf("%s: %s", r.Code, r.Error))
			}
		}
		pending = retry
		for _, j := range reply.Jobs {
			t.claimed(j.ID, j.Attempts, j.Lease, at)
			pending = append(pending, j)
		}
	}
	if len(pending) > 0 {
		w := benchWorker{b: b, base: base, id: id, queue: queue, t: t, errs: errs, onDone: onDone}
		w.reportBatch(context.WithoutCancel(ctx), pending)
	}
}

// cpu is the CPU time the running nodes have used.
func (c *procCluster) cpu() time.Duration {
	var total time.Duration
	for _, n := range c.Nodes {
		total += procCPU(n.Pid())
	}
	return total
}

// withServerCPU runs a scenario on the cluster and adds to each figure's
// note the cores the server processes used over the whole scenario, its
// untimed setup and checks included (the CPU column counts only the
// bench's own process).
func (c *procCluster) withServerCPU(scenario func() ([]Figure, error)) ([]Figure, error) {
	cpu, start := c.cpu(), time.Now()
	figs, err := scenario()
	cores := (c.cpu() - cpu).Seconds() / time.Since(start).Seconds()
	for i := range figs {
		figs[i].Note += fmt.Sprintf("; the 3 server processes used %.2f cores over the scenario (setup and checks included)", cores)
	}
	return figs, err
}

// rss reads each running node's resident memory, in bytes.
func (c *procCluster) rss() []int64 {
	out := make([]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = readProcMem(n.Pid()).RSS
	}
	return out
}

// sampleMem samples each node's memory every 100ms until the returned
// function is called, which returns the largest anonymous and file-backed
// resident sizes seen per node.
func (c *procCluster) sampleMem(ctx context.Context) func() []procMem {
	ctx, cancel := context.WithCancel(ctx)
	peaks := make([]procMem, len(c.Nodes))
	pids := make([]int, len(c.Nodes))
	for i, n := range c.Nodes {
		pids[i] = n.Pid()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			for i, pid := range pids {
				m := readProcMem(pid)
				peaks[i].Anon, peaks[i].File = max(peaks[i].Anon, m.Anon), max(peaks[i].File, m.File)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() []procMem {
		cancel()
		<-done
		return peaks
	}
}

// heapInUse is a node's go_memstats_heap_inuse_bytes from /metrics (0 if
// unreadable): the Go heap's spans in use, garbage not yet swept included.
func (b *bencher) heapInUse(ctx context.Context, node string) float64 {
	return b.metric(ctx, node, "go_memstats_heap_inuse_bytes")
}

// metric is the value of a series without labels in a node's /metrics (0
// if unreadable).
func (b *bencher) metric(ctx context.Context, node, name string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, node+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// snapshotFigure is what a snapshot of the full store costs per log entry
// on the leader, at the snapshot threshold in force (--snapshot-log-ratio
// raises it with the state file): the state file's bytes ÷ the entries
// between snapshots. The note compares it with the fixed threshold of
// 8,192 entries and gives what the leader's snapshots wrote over the run.
func (b *bencher) snapshotFigure(ctx context.Context, leader string, jobs int) Figure {
	m := func(name string) float64 { return b.metric(ctx, leader, name) }
	applied, written, count := m("workron_raft_applied_index"), m("workron_raft_snapshot_written_bytes_total"), m("workron_raft_snapshots_total")
	threshold, state := max(m("workron_raft_snapshot_threshold"), 1), m("workron_store_bytes")
	return Figure{Figure: "large_store_snapshot_bytes_per_entry", Unit: "bytes/entry", Value: state / threshold, Jobs: jobs, Load1: loadAverage(),
		Note: fmt.Sprintf("state.db %.0f MiB ÷ the %.0f entries between snapshots in force; a fixed 8,192 would be %.0f bytes/entry. "+
			"Over the run the leader took %.0f snapshots (%.0f MiB written) in %.0f log entries",
			state/(1<<20), threshold, state/8192, count, written/(1<<20), applied)}
}

// rssFigures are one figure per node: its resident memory now, with its
// parts, its Go heap, its peaks and its resident memory when the store was
// empty in the note.
func (c *procCluster) rssFigures(ctx context.Context, b *bencher, empty []int64, fillPeak []procMem, jobs int) []Figure {
	li, _, _ := c.leader(ctx, b)
	var figs []Figure
	for i, n := range c.Nodes {
		m := readProcMem(n.Pid())
		role := "follower"
		if i == li {
			role = "leader"
		}
		mib := func(b int64) float64 { return float64(b) / (1 << 20) }
		figs = append(figs, Figure{Figure: "large_store_rss_" + n.Name, Unit: "MiB", Value: mib(m.RSS),
			Target: role, Jobs: jobs, Load1: loadAverage(),
			Note: fmt.Sprintf("VmRSS of server process %s (%s) holding the store: %.0f MiB anonymous, %.0f MiB file-backed (the binary and the mmap'd state file); "+
				"Go heap in use %.0f MiB; peak (VmHWM) %.0f MiB, during the fill up to %.0f MiB anonymous and %.0f MiB file-backed; %.0f MiB after claim_done on the empty store",
				n.Name, role, mib(m.Anon), mib(m.File), b.heapInUse(ctx, n.URL)/(1<<20), mib(m.HWM), mib(fillPeak[i].Anon), mib(fillPeak[i].File), mib(empty[i]))})
	}
	return figs
}

// diskFigure is the mean over the nodes of the data directory's size on
// disk per job held; the note gives each node's files.
func (c *procCluster) diskFigure(jobs int) (Figure, []string) {
	fg := Figure{Figure: "large_store_disk_per_job", Unit: "bytes/job", Jobs: jobs, Load1: loadAverage()}
	var total int64
	var each, problems []string
	for _, n := range c.Nodes {
		_, all, err := dirSize(n.Data)
		if err != nil {
			problems = append(problems, err.Error())
		}
		total += all
		var parts []string
		for _, f := range []string{"state.db", "raft.db", "snapshots"} {
			_, sz, _ := dirSize(filepath.Join(n.Data, f))
			parts = append(parts, fmt.Sprintf("%s %.0f MiB", f, float64(sz)/(1<<20)))
		}
		each = append(each, fmt.Sprintf("%s %.0f MiB (%s)", n.Name, float64(all)/(1<<20), strings.Join(parts, ", ")))
	}
	fg.Value = float64(total) / float64(len(c.Nodes)) / float64(max(jobs, 1))
	fg.Note = "allocated size of each node's data dir ÷ jobs held: " + strings.Join(each, "; ")
	return fg, problems
}

// restartFigure stops a follower holding the store (SIGKILL when
// crash, else SIGTERM and a clean shutdown), starts it again and times
// until its /health answers 200 and its applied index reaches the
// leader's. The figure is large_store_restart or, clean,
// large_store_restart_clean.
func (c *procCluster) restartFigure(ctx context.Context, b *bencher, jobs int, crash bool) (Figure, []string) {
	fg := Figure{Figure: "large_store_restart_clean", Unit: "s", Jobs: jobs}
	how := "SIGTERM (clean shutdown)"
	if crash {
		fg.Figure, how = "large_store_restart", "SIGKILL"
	}
	li, _, err := c.leader(ctx, b)
	if err != nil {
		return fg, []string{err.Error()}
	}
	n, role := c.Nodes[(li+1)%len(c.Nodes)], "follower"
	if len(c.Nodes) == 1 {
		role = "only node"
	}
	_, size, _ := dirSize(n.Data)
	var lh wire.Health
	_, _ = b.call(ctx, http.MethodGet, c.Nodes[li].URL+"/health", nil, &lh)
	before := lh.AppliedIndex // the restarted node must reach it too
	if crash {
		n.Kill()
	} else {
		n.Stop(time.Minute)
	}
	snap := latestSnapshot(n.Data)
	start := time.Now()
	if _, err := n.Start(); err != nil {
		return fg, []string{err.Error()}
	}
	var healthy time.Duration
	var applied, want uint64
	err = poll.True(ctx, 20*time.Minute, 50*time.Millisecond, func() bool {
		if !n.Running() {
			return true
		}
		var h wire.Health
		if st, err := b.call(ctx, http.MethodGet, n.URL+"/health", nil, &h); err != nil || st != http.StatusOK {
			return false
		}
		if healthy == 0 {
			healthy = time.Since(start)
		}
		var lh wire.Health
		// With one node, the node itself, which serves once it leads again.
		if _, err := b.call(ctx, http.MethodGet, c.Nodes[li].URL+"/health", nil, &lh); err != nil || lh.Role != "leader" {
			return false
		}
		applied, want = h.AppliedIndex, max(lh.AppliedIndex, before)
		return applied >= want
	})
	d := time.Since(start)
	fg.Value, fg.Seconds, fg.Load1 = d.Seconds(), d.Seconds(), loadAverage()
	var problems []string
	switch {
	case !n.Running():
		problems = append(problems, fmt.Sprintf("%s exited after the restart: %s", n.Name, n.Tail(10)))
	case err != nil:
		problems = append(problems, fmt.Sprintf("%s at applied index %d of the leader's %d after %s", n.Name, applied, want, d.Round(time.Millisecond)))
	}
	fg.Note = fmt.Sprintf("%s %s %s (data dir %.0f MiB on disk, newest snapshot at index %d), start it: /health 200 after %.2f s, applied index %d = the leader's after %.2f s",
		how, role, n.Name, float64(size)/(1<<20), snap, healthy.Seconds(), applied, d.Seconds())
	return fg, problems
}

// latestSnapshot is the Raft index of the newest snapshot in a node's data
// dir (0 if none): Raft names each snapshot's directory TERM-INDEX-MILLIS.
func latestSnapshot(data string) uint64 {
	ents, _ := os.ReadDir(filepath.Join(data, "snapshots"))
	var newest uint64
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 3 || !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if idx, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			newest = max(newest, idx)
		}
	}
	return newest
}
