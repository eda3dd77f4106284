//go:build unix

package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/tools/jobcheck"
	"github.com/workron/workron/worker/client"
)

// Load of the bulk-retry end-to-end test.
const (
	bulkKillJobs  = 3000
	bulkKillQueue = "bulkkill"
	bulkKillWait  = 45 * time.Second
)

// TestEndToEndBulkRetryLeaderKilled runs a bulk retry of 3,000 failed jobs
// on three server processes and SIGKILLs the leader in the middle of the
// walk, then restarts it. A "failer" (this test, claiming through the API
// and reporting failure) fails every job it can claim, the first time and
// again after the retry, so a job the walk reached twice would be failed
// again by then, retried again, and show a third counted attempt: the
// check sees a retry applied twice, not only one the FSM skipped. The
// kill waits until the newest job (the first the walk reaches) has failed
// again, so a new leader that lost the walk's cursor and walked from the
// top would retry it a second time. The bulk must end done with matched
// == done == 3,000, none skipped or failed, its progress never going back;
// each job failed with exactly two counted attempts; and every node the
// same state digest.
func TestEndToEndBulkRetryLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts three processes and kills the leader during a bulk retry")
	}
	bin := workronBinary(t)
	begin := time.Now()
	c := startCluster(t, bin, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Servers, cfg.Rounds = c.URLs(), 20
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	ids := submitFailing(ctx, t, cl, bulkKillJobs)
	newest := ids[len(ids)-1]
	failerCtx, stopFailer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { runFailer(failerCtx, cl) })
	defer func() { stopFailer(); wg.Wait() }()
	waitFailed(ctx, t, cl, bulkKillJobs)
	t.Logf("%d jobs failed %s after the start", bulkKillJobs, time.Since(begin).Round(time.Millisecond))

	req := wire.BulkRequest{Action: wire.BulkRetry, Status: wire.StatusFailed, Queue: bulkKillQueue}
	if n, err := cl.CountBulk(ctx, req); err != nil || n.Matched != bulkKillJobs || !n.Exact {
		t.Fatalf("dry run: %+v, %v; want %d exactly", n, err, bulkKillJobs)
	}
	b, err := cl.StartBulk(ctx, req)
	if err != nil {
		t.Fatal(err)
	}

	// Kill the leader mid-walk: progress made, the newest job failed again
	// after its retry, the walk not over.
	var before wire.Bulk
	err = poll.Until(ctx, bulkKillWait, 5*time.Millisecond, func() error {
		got, err := cl.GetBulk(ctx, b.ID)
		if err != nil {
			return err
		}
		if before = *got; got.State != wire.BulkRunning {
			return nil
		}
		if got.Matched == 0 {
			return fmt.Errorf("bulk %s has no progress yet", b.ID)
		}
		j, err := cl.Get(ctx, newest)
		if err != nil {
			return err
		}
		if j.Status != wire.StatusFailed || countedAttempts(*j) != 2 {
			return fmt.Errorf("newest job %s is %s with %d counted attempts", j.ID, j.Status, countedAttempts(*j))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("bulk never in the middle of its walk: %v", err)
	}
	if before.State != wire.BulkRunning || before.Matched >= bulkKillJobs {
		t.Fatalf("the walk ended before the kill (%+v): raise bulkKillJobs", before)
	}
	leader := c.leader(t)
	t.Logf("SIGKILL leader %s at matched %d of %d", leader.Name, before.Matched, bulkKillJobs)
	leader.Kill()
	c.restart(t, leader)
	t.Logf("%s restarted; leader is %s", leader.Name, c.leader(t).Name)

	// The walk goes on from where it was and ends; its progress never
	// goes back.
	var final wire.Bulk
	err = poll.Until(ctx, bulkKillWait, 20*time.Millisecond, func() error {
		got, err := cl.GetBulk(ctx, b.ID)
		if err != nil {
			return err
		}
		if got.Matched < before.Matched || got.Done < before.Done {
			t.Errorf("bulk %s went back from matched %d, done %d to matched %d, done %d", b.ID, before.Matched, before.Done, got.Matched, got.Done)
		}
		before, final = *got, *got
		if got.State != wire.BulkDone {
			return fmt.Errorf("bulk %s is %s at matched %d", b.ID, got.State, got.Matched)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if final.Matched != bulkKillJobs || final.Done != bulkKillJobs || final.Skipped != 0 || final.Failed != 0 {
		t.Errorf("bulk ended %+v; want matched = done = %d, none skipped or failed", final, bulkKillJobs)
	}
	t.Logf("bulk done %s after the start: %+v", time.Since(begin).Round(time.Millisecond), final)

	waitFailed(ctx, t, cl, bulkKillJobs) // every retried job failed again
	stopFailer()
	wg.Wait()
	checkRetriedOnce(ctx, t, cl, ids)
	checkDigests(ctx, t, c)
	c.checkAlive(t)
	t.Logf("bulk end-to-end run took %s", time.Since(begin).Round(time.Millisecond))
}

// submitFailing submits n jobs of bulkKillQueue that may run once, in
// batches, and returns their ids in submit order (oldest first).
func submitFailing(ctx context.Context, t *testing.T, cl *client.Client, n int) []string {
	t.Helper()
	one := 1
	var ids []string
	for len(ids) < n {
		var reqs []wire.SubmitRequest
		for i := len(ids); i < min(n, len(ids)+500); i++ {
			reqs = append(reqs, wire.SubmitRequest{Command: "false", Queue: bulkKillQueue, MaxAttempts: &one,
				IdempotencyKey: "bulkkill-" + strconv.Itoa(i)})
		}
		got, err := cl.SubmitBatchIDs(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	return ids
}

// runFailer claims the jobs of bulkKillQueue and reports each attempt
// failed, until ctx ends. Errors (a failover) are tried again; an attempt
// whose reply was lost expires, which fails the job too.
func runFailer(ctx context.Context, cl *client.Client) {
	var reports []wire.BatchReport
	for ctx.Err() == nil {
		res, err := cl.Claim(ctx, wire.ClaimRequest{WorkerID: "failer", Queues: []string{bulkKillQueue},
			Max: 200, Wait: "200ms", Shell: true, Reports: reports})
		if err != nil {
			continue // the reports go again with the next claim: resending is safe
		}
		reports = reports[:0]
		for _, j := range res.Jobs {
			reports = append(reports, wire.BatchReport{JobID: j.ID, Status: wire.StatusFailed,
				ReportRequest: wire.ReportRequest{Lease: j.Lease, Error: "failed on purpose"}})
		}
	}
}

// waitFailed waits until n jobs of bulkKillQueue are failed and none is
// in any other status.
func waitFailed(ctx context.Context, t *testing.T, cl *client.Client, n int) {
	t.Helper()
	err := poll.Until(ctx, bulkKillWait, 50*time.Millisecond, func() error {
		got, err := cl.Count(ctx, client.ListOptions{Queue: bulkKillQueue})
		if err != nil {
			return err
		}
		if !got.Exact || got.Count != n || got.ByStatus[wire.StatusFailed] != n {
			return fmt.Errorf("jobs of %s: %+v", bulkKillQueue, got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("want %d failed jobs: %v", n, err)
	}
}

// countedAttempts is how many of j's attempts counted against its
// max_attempts: each ended the job failed, so each after the first
// follows one retry.
func countedAttempts(j wire.Job) int {
	n := 0
	for _, a := range j.AttemptHistory {
		switch a.Status {
		case wire.AttemptRateLimited, wire.AttemptSnoozed, wire.AttemptReturned:
		default:
			n++
		}
	}
	return n
}

// checkRetriedOnce lists the queue's jobs and checks that each submitted
// job is failed after exactly two counted attempts (its first run, and
// one after the bulk's retry), with sound attempts (jobcheck.Attempts).
func checkRetriedOnce(ctx context.Context, t *testing.T, cl *client.Client, ids []string) {
	t.Helper()
	byID := make(map[string]wire.Job, len(ids))
	cursor := ""
	for {
		page, err := cl.List(ctx, client.ListOptions{Queue: bulkKillQueue, Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			byID[j.ID] = j
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	bad := 0
	for _, id := range ids {
		j, ok := byID[id]
		problems := jobcheck.Attempts(j)
		switch {
		case !ok:
			problems = append(problems, "job "+id+" is not listed")
		case j.Status != wire.StatusFailed || countedAttempts(j) != 2:
			problems = append(problems, fmt.Sprintf("job %s is %s after %d counted attempts, want failed after 2 (retried once): %s",
				id, j.Status, countedAttempts(j), jobcheck.History(j)))
		}
		for _, p := range problems {
			if bad++; bad <= 10 {
				t.Error(p)
			}
		}
	}
	if bad > 10 {
		t.Errorf("and %d more problems", bad-10)
	}
	if len(byID) != len(ids) {
		t.Errorf("queue %s lists %d jobs, %d were submitted", bulkKillQueue, len(byID), len(ids))
	}
}

// checkDigests waits until every node reports the same applied index twice
// in a row and checks that they report one state digest there.
func checkDigests(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	var last []wire.Digest
	err := poll.Until(ctx, 20*time.Second, 100*time.Millisecond, func() error {
		var ds []wire.Digest
		for _, n := range c.Nodes {
			var d wire.Digest
			status, body, err := c.Get(ctx, n.URL+"/debug/digest", &d)
			if err != nil || status != http.StatusOK {
				return fmt.Errorf("%s: status %d, err %v, body %s", n.Name, status, err, body)
			}
			if d.Check != "ok" {
				t.Errorf("%s: store check: %s", n.Name, d.Check)
			}
			ds = append(ds, d)
		}
		last = ds
		for _, d := range ds[1:] {
			if d.AppliedIndex != ds[0].AppliedIndex {
				return fmt.Errorf("applied indexes differ: %+v", ds)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("nodes did not settle on one applied index: %v", err)
	}
	for i, d := range last[1:] {
		if d.Digest != last[0].Digest {
			t.Errorf("%s and %s differ at applied index %d: digest %s vs %s", c.Nodes[0].Name, c.Nodes[i+1].Name, d.AppliedIndex, last[0].Digest, d.Digest)
		}
	}
	t.Logf("all nodes at applied index %d with digest %s", last[0].AppliedIndex, last[0].Digest)
}
