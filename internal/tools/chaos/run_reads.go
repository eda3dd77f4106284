//go:build unix

package chaos

// What a run reads of the cluster once the load ends (run.go): the jobs
// and their journals, the queues' counts, the replicas' digests; and how
// it builds and starts the processes.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// readJournals reads the journal of each job, with every step's result.
func readJournals(ctx context.Context, c *cluster, jobs []wire.Job) (map[string][]wire.Step, error) {
	cfg := client.DefaultConfig()
	cfg.Servers, cfg.HTTPClient = c.pc.URLs(), c.pc.HTTP
	cl, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]wire.Step, len(jobs))
	for _, j := range jobs {
		var steps []wire.Step
		cursor := ""
		for {
			page, err := cl.Steps(ctx, j.ID, cursor, 100)
			if err != nil {
				return out, fmt.Errorf("job %s: %w", j.ID, err)
			}
			for _, st := range page.Steps {
				full, err := cl.Step(ctx, j.ID, st.Key)
				if err != nil {
					return out, fmt.Errorf("job %s step %s: %w", j.ID, st.Key, err)
				}
				steps = append(steps, *full)
			}
			if page.NextCursor == "" || len(steps) > 10*len(durableKeys()) {
				break
			}
			cursor = page.NextCursor
		}
		out[j.ID] = steps
	}
	return out, nil
}

// buildBinaries builds the main packages pkgs (without -race) into dir,
// each named after its directory, in one go build.
func buildBinaries(dir string, pkgs ...string) error {
	if len(pkgs) == 0 {
		return nil
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

func openNetwork(cfg Config, logf func(string, ...any)) (network, bool, error) {
	if !cfg.NoNetns {
		nw, err := newNsNet(cfg.Nodes, cfg.RealWorkers+cfg.DurableWorkers)
		if err == nil {
			return nw, true, nil
		}
		if !errors.Is(err, errNoNetworkFaults) {
			return nil, false, err
		}
		logf("NOTE: %v; running on loopback without partitions (run as root for them)", err)
	}
	nw, err := newLoopNet(cfg.Nodes)
	return nw, false, err
}

func startAll(ctx context.Context, c *cluster) error {
	if err := c.startNodes(ctx, c.nodes...); err != nil {
		return err
	}
	if _, err := c.waitLeader(ctx, 20*time.Second); err != nil {
		return err
	}
	for i := range c.workers {
		if err := c.startWorker(i); err != nil {
			return err
		}
	}
	return nil
}

// waitFinished polls the queue's counts until every job of the load is
// done or failed, and gives up once stall passes without any job finishing:
// a backlog that drains slowly is waited for, a stuck one is not.
func waitFinished(ctx context.Context, c *cluster, stall time.Duration, logf func(string, ...any)) bool {
	progress, lastLog, finished := time.Now(), time.Now(), -1
	for {
		counts, err := queueCounts(ctx, c)
		if err == nil {
			total := 0
			for _, n := range counts {
				total += n
			}
			done := counts[wire.StatusDone] + counts[wire.StatusFailed] + counts[wire.StatusCancelled]
			if done == total {
				return true
			}
			if done > finished {
				finished, progress = done, time.Now()
			}
			if time.Since(lastLog) > 10*time.Second {
				logf("draining: %v", counts)
				lastLog = time.Now()
			}
		}
		if time.Since(progress) > stall {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// queueCounts reads the jobs of the load's queues and the schedule's queue
// by status, added up (GET /queues).
func queueCounts(ctx context.Context, c *cluster) (map[string]int, error) {
	var out struct {
		Queues []struct {
			Name   string         `json:"name"`
			Counts map[string]int `json:"counts"`
		} `json:"queues"`
	}
	var lastErr error
	for _, n := range c.nodes {
		status, _, err := c.pc.Get(ctx, n.URL+"/queues", &out)
		if err == nil && status == http.StatusOK {
			counts := make(map[string]int)
			for _, q := range out.Queues {
				if q.Name == chaosQueue || q.Name == limitedQueue || q.Name == cronQueue || q.Name == durableQueue {
					for st, k := range q.Counts {
						counts[st] += k
					}
				}
			}
			return counts, nil
		}
		lastErr = fmt.Errorf("GET %s/queues: HTTP %d, %v", n.URL, status, err)
	}
	return nil, lastErr
}

// listAll pages through GET /jobs of a queue, as a consistent read,
// through any node that answers.
func listAll(ctx context.Context, c *cluster, queue string) ([]wire.Job, error) {
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		for _, n := range c.nodes {
			jobs, err := listFrom(ctx, c, n.URL, queue)
			if err == nil {
				return jobs, nil
			}
			lastErr = err
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return nil, lastErr
}

func listFrom(ctx context.Context, c *cluster, base, queue string) ([]wire.Job, error) {
	var all []wire.Job
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}, "queue": {queue}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page wire.JobList
		status, _, err := c.pc.Get(ctx, base+"/jobs?"+q.Encode(), &page)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("GET %s/jobs: HTTP %d", base, status)
		}
		all = append(all, page.Jobs...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// checkReplicas waits until every node has applied the same index twice in
// a row, with its whole log committed, then compares their digests.
func checkReplicas(ctx context.Context, c *cluster, rep *Report, logf func(string, ...any)) (uint64, string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var prev []wire.Digest
	for {
		var ds []wire.Digest
		for _, n := range c.nodes {
			var d wire.Digest
			status, _, err := c.pc.Get(ctx, n.URL+"/debug/digest", &d)
			if err != nil || status != http.StatusOK {
				ds = nil
				break
			}
			ds = append(ds, d)
		}
		if len(ds) == len(c.nodes) && sameIndex(ds) && len(prev) == len(ds) && ds[0].AppliedIndex == prev[0].AppliedIndex {
			return compareDigests(ds, rep, logf)
		}
		prev = ds
		select {
		case <-ctx.Done():
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("nodes did not settle on one applied index within 30s: %+v", ds))
			return 0, ""
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// sameIndex: every node applied the same index, and committed its whole
// log, the same on every node. (Applied may trail commit by entries that
// are not commands, like a new leader's no-op.)
func sameIndex(ds []wire.Digest) bool {
	for _, d := range ds {
		if d.AppliedIndex != ds[0].AppliedIndex || d.CommitIndex != ds[0].CommitIndex || d.LastLogIndex != d.CommitIndex || d.AppliedIndex > d.CommitIndex {
			return false
		}
	}
	return true
}

func compareDigests(ds []wire.Digest, rep *Report, logf func(string, ...any)) (uint64, string) {
	var lines []string
	for _, d := range ds {
		lines = append(lines, fmt.Sprintf("%s applied %d commit %d last %d digest %.16s check %s",
			d.NodeID, d.AppliedIndex, d.CommitIndex, d.LastLogIndex, d.Digest, d.Check))
		if d.Check != "ok" {
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("%s: store check: %s", d.NodeID, d.Check))
		}
		if d.Digest != ds[0].Digest {
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("divergent replicas at applied index %d: %s has digest %s, %s has %s",
				d.AppliedIndex, ds[0].NodeID, ds[0].Digest, d.NodeID, d.Digest))
		}
	}
	sort.Strings(lines)
	logf("replicas: %s", strings.Join(lines, "; "))
	return ds[0].AppliedIndex, ds[0].Digest
}

// panics returns the first panic line of a log, if any.
func panics(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "panic:") || strings.Contains(line, "fatal error:") || strings.HasPrefix(line, "workron: stopping") {
			return line
		}
	}
	return ""
}
