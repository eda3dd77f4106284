//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/testkit/proccluster"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// The end-to-end test runs the real binary: three server processes, two
// worker processes, a load of submits through random nodes, and two SIGKILLs
// of the leader while the load runs. The binary is built once, without -race
// (only the test binary has it), into a directory TestMain removes.

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// workronBinary builds ./cmd/workron once per test run and returns its path.
func workronBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "workron-e2e-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "workron")
		out, err := exec.Command("go", "build", "-o", buildBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Load and timing of the end-to-end test.
const (
	e2eJobs    = 2000
	e2eClients = 16
	// e2eSubmitRate paces the submits (jobs per second) so the load is still
	// running when the second leader is killed; unpaced, 16 clients submit
	// 2,000 jobs in a second or two.
	e2eSubmitRate = 200
	// e2eKillPause is how long a killed leader stays down.
	e2eKillPause = 700 * time.Millisecond
	// e2eDoneWait bounds the wait for every accepted job to be done.
	e2eDoneWait = 90 * time.Second
)

// e2eKillAt are the fractions of the submits accepted when the leader is
// killed.
var e2eKillAt = []float64{0.2, 0.6}

func TestEndToEndLeaderKilledTwiceUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts five processes and kills the leader twice")
	}
	bin := workronBinary(t)
	begin := time.Now()
	c := startCluster(t, bin, t.TempDir())
	c.startWorker(t, "w1")
	c.startWorker(t, "w2")
	t.Logf("cluster of 3 nodes and 2 workers up in %s", time.Since(begin).Round(time.Millisecond))

	// The load runs beside the kills; the kills run here because they may
	// t.Fatal.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var accepted atomic.Int64
	loadDone := make(chan *loadResult, 1)
	go func() { loadDone <- c.runLoad(ctx, e2eJobs, &accepted) }()
	var load *loadResult
	t.Cleanup(func() {
		cancel()
		if load == nil {
			<-loadDone
		}
	})

	for i, frac := range e2eKillAt {
		at := int64(frac * e2eJobs)
		if poll.True(ctx, 0, 5*time.Millisecond, func() bool { return accepted.Load() >= at }) != nil {
			t.Fatalf("kill %d: only %d of %d submits accepted before the load's deadline", i+1, accepted.Load(), at)
		}
		leader := c.leader(t)
		t.Logf("kill %d: SIGKILL leader %s after %d accepted submits", i+1, leader.Name, accepted.Load())
		leader.Kill()
		time.Sleep(e2eKillPause) // the outage, not a synchronisation
		c.restart(t, leader)
		newLeader := c.leader(t)
		t.Logf("kill %d: %s restarted; leader is %s; %d accepted", i+1, leader.Name, newLeader.Name, accepted.Load())
	}

	load = <-loadDone
	cancel()
	t.Logf("load: %d submits accepted in %s, %d retried sends, %d replies found an earlier attempt's job",
		accepted.Load(), time.Since(begin).Round(time.Millisecond), load.retries.Load(), load.existing.Load())
	for _, err := range load.errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	jobs := c.waitAllDone(t, load.ids)
	t.Logf("all %d jobs done %s after the start", len(load.ids), time.Since(begin).Round(time.Millisecond))
	checkJobs(t, load.ids, jobs)
	c.checkNodesAgree(t, load.ids, jobs)
	c.checkAlive(t)
	t.Logf("end-to-end run took %s", time.Since(begin).Round(time.Millisecond))
}

// proc and node are the shared harness's process and server process.
type (
	proc = proccluster.Proc
	node = proccluster.Node
)

// cluster is the server processes of a test (internal/testkit/proccluster) and the
// worker processes it starts.
type cluster struct {
	*proccluster.Cluster
	dir     string
	hc      *http.Client
	workers []*proc
}

// newCluster is a cluster without servers yet, whose processes are killed
// (and whose logs are printed, if the test failed) when the test ends.
func newCluster(t *testing.T, dir string) *cluster {
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * e2eClients, IdleConnTimeout: 10 * time.Second}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	c := &cluster{Cluster: &proccluster.Cluster{HTTP: hc}, dir: dir, hc: hc}
	t.Cleanup(func() {
		if t.Failed() {
			c.printLogs(t)
		}
		c.killAll()
		tr.CloseIdleConnections()
	})
	return c
}

// startCluster starts three nodes on free ports and waits until all agree on
// a leader. extra flags go to every server.
func startCluster(t *testing.T, bin, dir string, extra ...string) *cluster {
	t.Helper()
	c := newCluster(t, dir)
	pc, err := proccluster.Start(context.Background(), proccluster.Config{Bin: bin, Dir: dir, HTTP: c.hc,
		Args: append([]string{"--raft-heartbeat-timeout", "150ms", "--raft-election-timeout", "150ms",
			"--lease-ttl", "2s", "--reap-interval", "100ms", "--log-level", "info"}, extra...)})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	c.Cluster = pc
	c.leader(t)
	return c
}

// restart starts a killed node again with its flags and data.
func (c *cluster) restart(t *testing.T, n *node) {
	t.Helper()
	if err := c.Restart(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) startWorker(t *testing.T, id string) {
	t.Helper()
	w := &proc{Name: id, Bin: c.Nodes[0].Bin, Log: filepath.Join(c.dir, id+".log"),
		Args: []string{"worker", "--server", strings.Join(c.URLs(), ","), "--id", id,
			"--concurrency", "8", "--queues", "default", "--log-level", "info"}}
	if _, err := w.Start(); err != nil {
		t.Fatal(err)
	}
	c.workers = append(c.workers, w)
}

func (c *cluster) killAll() {
	for _, w := range c.workers {
		w.Kill()
	}
	c.Stop(0)
}

func (c *cluster) printLogs(t *testing.T) {
	t.Log(c.Logs(40))
	for _, w := range c.workers {
		t.Logf("--- last lines of %s (%s) ---\n%s", w.Name, w.Log, w.Tail(40))
	}
}

// checkAlive fails the test for every process that died on its own.
func (c *cluster) checkAlive(t *testing.T) {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.Running() {
			t.Errorf("node %s exited; see its log", n.Name)
		}
	}
	for _, w := range c.workers {
		if !w.Running() {
			t.Errorf("worker %s exited; see its log", w.Name)
		}
	}
}

// leader waits until one running node leads and every running node says so.
func (c *cluster) leader(t *testing.T) *node {
	t.Helper()
	n, err := c.WaitLeader(context.Background(), 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// loadResult is what the load saw: the id each submit got (by job number),
// and how often it had to resend.
type loadResult struct {
	ids      []string
	errs     []error
	retries  atomic.Int64
	existing atomic.Int64
}

// runLoad submits n jobs through random nodes with e2eClients concurrent
// clients, paced at e2eSubmitRate. Every job has its own idempotency key, so
// a submit is resent after 503s, 502s, 504s and connection errors until it
// gets a 2xx or ctx ends.
func (c *cluster) runLoad(ctx context.Context, n int, accepted *atomic.Int64) *loadResult {
	res := &loadResult{ids: make([]string, n)}
	next := make(chan int)
	go func() {
		defer close(next)
		tick := time.NewTicker(time.Second / e2eSubmitRate)
		defer tick.Stop()
		for i := range n {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case <-ctx.Done():
				return
			case next <- i:
			}
		}
	}()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for range e2eClients {
		wg.Go(func() {
			for i := range next {
				id, err := c.submit(ctx, i, res)
				mu.Lock()
				if err != nil {
					res.errs = append(res.errs, err)
				} else {
					res.ids[i] = id
					accepted.Add(1)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i, id := range res.ids {
		if id == "" && len(res.errs) < 10 {
			res.errs = append(res.errs, fmt.Errorf("job %d was never accepted", i))
		}
	}
	return res
}

func jobKey(i int) string { return "e2e-" + strconv.Itoa(i) }

// submit sends job i until a node accepts it.
func (c *cluster) submit(ctx context.Context, i int, res *loadResult) (string, error) {
	cmd := "echo $WORKRON_JOB_ID"
	if i%10 == 0 {
		cmd = "sleep 0.3; echo $WORKRON_JOB_ID" // some jobs run across a failover
	}
	body, _ := json.Marshal(wire.SubmitRequest{Command: cmd, IdempotencyKey: jobKey(i)})
	var last string
	for try := 0; ; try++ {
		if try > 0 {
			res.retries.Add(1)
			pause := min(10*time.Millisecond<<min(try, 6), 500*time.Millisecond)
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("job %d: not accepted before the load's deadline; last reply: %s", i, last)
			case <-time.After(pause/2 + rand.N(pause/2)):
			}
		}
		n := c.Nodes[rand.IntN(len(c.Nodes))]
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL+"/jobs", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.hc.Do(req)
		if err != nil {
			last = err.Error()
			continue // connection refused or reset, timeout: resend
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err.Error()
			continue
		}
		switch resp.StatusCode {
		case http.StatusCreated, http.StatusOK:
			var j wire.Job
			if err := json.Unmarshal(data, &j); err != nil || j.ID == "" {
				return "", fmt.Errorf("job %d: %d reply without a job id: %s", i, resp.StatusCode, data)
			}
			if resp.StatusCode == http.StatusOK {
				res.existing.Add(1)
			}
			return j.ID, nil
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
			last = fmt.Sprintf("%s: %d %s", n.Name, resp.StatusCode, bytes.TrimSpace(data))
		default:
			return "", fmt.Errorf("job %d: %s answered %d: %s", i, n.Name, resp.StatusCode, data)
		}
	}
}

// listAll pages through GET /jobs on one node and returns every job, failing
// on an id listed twice.
func (c *cluster) listAll(ctx context.Context, base string, stale bool) ([]wire.Job, error) {
	var (
		all    []wire.Job
		cursor string
	)
	seen := make(map[string]bool)
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if stale {
			q.Set("stale", "1")
		}
		var page wire.JobList
		status, body, err := c.Get(ctx, base+"/jobs?"+q.Encode(), &page)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("GET %s/jobs: %d %s", base, status, bytes.TrimSpace(body))
		}
		for _, j := range page.Jobs {
			if seen[j.ID] {
				return nil, fmt.Errorf("GET %s/jobs lists %s twice", base, j.ID)
			}
			seen[j.ID] = true
		}
		all = append(all, page.Jobs...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// waitAllDone polls the job list until every accepted job is done, and
// returns the last listing. A job that ends any other way fails at once.
func (c *cluster) waitAllDone(t *testing.T, ids []string) []wire.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eDoneWait)
	defer cancel()
	var (
		jobs    []wire.Job
		summary string
		bad     error
	)
	lastLog := time.Now()
	ok := poll.True(ctx, 0, 500*time.Millisecond, func() bool {
		n := c.Nodes[rand.IntN(len(c.Nodes))]
		list, err := c.listAll(ctx, n.URL, false)
		if err != nil {
			summary = err.Error()
			return false
		}
		byID := make(map[string]*wire.Job, len(list))
		for k := range list {
			byID[list[k].ID] = &list[k]
		}
		counts := make(map[string]int)
		for _, id := range ids {
			j := byID[id]
			if j == nil {
				counts["missing"]++
				continue
			}
			counts[j.Status]++
			if j.Status == wire.StatusFailed || j.Status == wire.StatusCancelled {
				bad = fmt.Errorf("job %s ended %s: %s (history %+v)", j.ID, j.Status, j.LastError, j.AttemptHistory)
			}
		}
		summary = fmt.Sprint(counts)
		if time.Since(lastLog) > 10*time.Second {
			t.Logf("waiting for jobs: %s", summary)
			lastLog = time.Now()
		}
		jobs = list
		return bad != nil || counts[wire.StatusDone] == len(ids)
	}) == nil
	if bad != nil {
		t.Fatal(bad)
	}
	if !ok {
		t.Fatalf("not every accepted job done after %s: %s", e2eDoneWait, summary)
	}
	return jobs
}

// checkJobs checks the final listing against what the load was told: one
// job per submit, each done exactly once (internal/tools/jobcheck), by its own
// command.
func checkJobs(t *testing.T, ids []string, jobs []wire.Job) {
	t.Helper()
	accepted := make(map[string]string, len(ids))
	for i, id := range ids {
		accepted[jobKey(i)] = id
	}
	_, problems := jobcheck.Accepted(accepted, jobs)
	for _, p := range problems {
		t.Error(p)
	}
	if len(jobs) != len(ids) {
		t.Errorf("the cluster lists %d jobs; %d submits were accepted", len(jobs), len(ids))
	}
	retried := 0
	for _, j := range jobs {
		if _, ok := accepted[j.IdempotencyKey]; !ok {
			t.Errorf("job %s has key %q, which no accepted submit sent", j.ID, j.IdempotencyKey)
		}
		if j.Output != j.ID+"\n" {
			t.Errorf("job %s output %q, want its own id", j.ID, j.Output)
		}
		if p := jobcheck.FinishedOnce(j); len(p) > 0 {
			t.Error(strings.Join(p, "; "))
			continue
		}
		if j.Attempts > 1 {
			retried++
			if retried <= 10 {
				t.Logf("job %s ran %d times: %s", j.ID, j.Attempts, jobcheck.History(j))
			}
		}
	}
	t.Logf("%d jobs listed, %d ran more than once (attempts lost to a failover or an expired lease)", len(jobs), retried)
}

// checkNodesAgree waits until all nodes applied the same index, then
// compares their local (stale) state: the whole job list, and a sample of
// single jobs.
func (c *cluster) checkNodesAgree(t *testing.T, ids []string, jobs []wire.Job) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var (
		prev    []uint64
		stable  int
		summary string
	)
	ok := poll.True(ctx, 0, 200*time.Millisecond, func() bool {
		var idx []uint64
		for _, n := range c.Nodes {
			var cl wire.Cluster
			status, _, err := c.Get(ctx, n.URL+"/cluster", &cl)
			if err != nil || status != http.StatusOK {
				summary = fmt.Sprintf("%s: status %d, err %v", n.Name, status, err)
				return false
			}
			idx = append(idx, cl.AppliedIndex)
		}
		summary = fmt.Sprintf("applied indexes %v", idx)
		same := slices.Equal(idx, prev) && idx[0] == idx[1] && idx[1] == idx[2]
		prev = idx
		if same {
			stable++
		} else {
			stable = 0
		}
		return stable >= 2
	}) == nil
	if !ok {
		t.Fatalf("nodes did not settle on one applied index: %s", summary)
	}
	t.Logf("all nodes at the same %s", summary)

	var lists [][]byte
	for _, n := range c.Nodes {
		list, err := c.listAll(ctx, n.URL, true)
		if err != nil {
			t.Fatalf("list on %s: %v", n.Name, err)
		}
		b, _ := json.Marshal(list)
		lists = append(lists, b)
	}
	for i := 1; i < len(lists); i++ {
		if !bytes.Equal(lists[0], lists[i]) {
			t.Errorf("%s and %s list different jobs (stale reads after quiescence)", c.Nodes[0].Name, c.Nodes[i].Name)
		}
	}

	sample := make(map[string]bool)
	for _, j := range jobs {
		if j.Attempts > 1 {
			sample[j.ID] = true
		}
	}
	for _, k := range rand.Perm(len(ids))[:min(100, len(ids))] {
		sample[ids[k]] = true
	}
	for id := range sample {
		var first []byte
		for _, n := range c.Nodes {
			var j wire.Job
			status, body, err := c.Get(ctx, n.URL+"/jobs/"+url.PathEscape(id)+"?stale=1", &j)
			if err != nil || status != http.StatusOK {
				t.Errorf("GET /jobs/%s?stale=1 on %s: status %d, err %v, body %s", id, n.Name, status, err, body)
				continue
			}
			if j.Status != wire.StatusDone {
				t.Errorf("job %s is %s on %s", id, j.Status, n.Name)
			}
			if first == nil {
				first = body
			} else if !bytes.Equal(first, body) {
				t.Errorf("job %s differs between nodes:\n%s: %s\n%s: %s", id, c.Nodes[0].Name, first, n.Name, body)
			}
		}
	}
	t.Logf("nodes agree on the whole job list and on %d sampled jobs", len(sample))
}

// startWorkerProc starts `workron worker --server server --id id args...`
// as a process (env added to its environment), killed at the end of the
// test, its log's tail printed if the test failed.
func startWorkerProc(t *testing.T, bin, server, id string, env []string, args ...string) *proc {
	t.Helper()
	w := &proc{Name: id, Bin: bin, Log: filepath.Join(t.TempDir(), "worker.log"), Env: env,
		Args: append([]string{"worker", "--server", server, "--id", id}, args...)}
	if _, err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Kill()
		if t.Failed() {
			t.Logf("worker log:\n%s", w.Tail(60))
		}
	})
	return w
}
