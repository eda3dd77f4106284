//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// gangCommand is what each task of the test gang runs. It records its
// process group (so the test can end orphans), blocks on its first run, and
// on SIGTERM leaves a checkpoint and exits after half a second (so the drain
// lasts long enough to lose a leader in it). Once the test made the rerun
// marker, a run reports what it was handed and ends.
const gangCommand = `echo $$ > "$E2E_DIR/pid.$WORKRON_JOB_ID.$WORKRON_ATTEMPT"
trap 'echo "ckpt-$GANG_INDEX" > "$WORKRON_CHECKPOINT"; sleep 0.5; exit 143' TERM
if [ -e "$E2E_DIR/rerun" ]; then
  echo "index=$GANG_INDEX size=$GANG_SIZE ckpt=$(cat "$WORKRON_CHECKPOINT" 2>/dev/null) data=$CHECKPOINT_DATA peers=$GANG_PEERS"
  exit 0
fi
sleep 25 & wait`

// TestEndToEndGangSurvivesWorkerAndLeaderLoss runs the real binary: three
// servers and four workers (8000 MB VRAM, tag gpu, one slot each). A gang of
// three is placed and runs; the worker of task 1 is SIGKILLed mid-run; its
// lease expires and the gang drains: the other two tasks are preempted
// (SIGTERM, checkpoint, acknowledgement) while the leader is SIGKILLed and
// restarted. The gang must then be placed again on live workers only and
// finish, with the siblings' attempts given back and their checkpoints
// handed to their next attempts.
func TestEndToEndGangSurvivesWorkerAndLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: seven processes, a worker and a leader killed")
	}
	bin := workronBinary(t)
	begin := time.Now()
	dir := t.TempDir()
	c := startCluster(t, bin, dir, "--worker-offline-after", "2s", "--reserve-timeout", "5s",
		"--drain-timeout", "8s", "--admission-interval", "100ms")
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL
	}
	workers := make(map[string]*proc)
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("g%d", i)
		w := &proc{Name: id, Bin: bin, Log: filepath.Join(dir, id+".log"), Args: []string{"worker",
			"--server", strings.Join(urls, ","), "--id", id, "--concurrency", "1", "--queues", "default",
			"--vram-mb", "8000", "--memory-mb", "16000", "--tags", "gpu", "--exec-addr", fmt.Sprintf("127.0.0.1:%d", 9000+i),
			"--poll-wait", "1s", "--kill-grace", "3s", "--log-level", "info"}}
		if _, err := w.Start(); err != nil {
			t.Fatal(err)
		}
		c.workers = append(c.workers, w)
		workers[id] = w
	}
	t.Cleanup(func() { killTaskGroups(dir) })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c.waitActiveWorkers(ctx, t, 4)
	t.Logf("3 nodes and 4 workers up in %s", time.Since(begin).Round(time.Millisecond))

	body := map[string]any{"command": gangCommand, "gang_size": 3, "env": map[string]string{"E2E_DIR": dir},
		"resources": map[string]int{"vram_mb": 8000}, "tags": []string{"gpu"}, "max_attempts": 3,
		"backoff": map[string]string{"base": "100ms", "max": "1s"}, "idempotency_key": "e2e-gang"}
	var sub wire.GangSubmitResponse
	if status, raw := c.post(ctx, t, "/jobs", body, &sub); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("gang submit: %d %s", status, raw)
	}
	first := c.waitGang(ctx, t, sub.GangID, func(g wire.Gang) bool {
		return g.Status == "running" && pidFiles(dir) == 3
	})
	victim := first.Workers[1]
	t.Logf("gang %s runs on %v; SIGKILL worker %s (task %s) and its task", first.GangID, first.Workers, victim, first.Tasks[1])
	workers[victim].Kill()
	killTaskGroup(dir, first.Tasks[1])

	draining := c.waitGang(ctx, t, sub.GangID, func(g wire.Gang) bool { return g.Status == "draining" })
	if err := os.WriteFile(filepath.Join(dir, "rerun"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stopping := 0
	for _, j := range draining.Jobs {
		if j.Status == wire.StatusRunning && j.PreemptionEpoch == draining.Epoch {
			stopping++
		}
	}
	if stopping == 0 {
		t.Fatalf("the gang drains but no sibling is left to preempt: %+v", draining.Jobs)
	}
	leader := c.leader(t)
	t.Logf("gang draining at epoch %d (%s), %d siblings being preempted; SIGKILL leader %s", draining.Epoch, draining.LastError, stopping, leader.Name)
	leader.Kill()
	time.Sleep(e2eKillPause) // the outage, not a synchronisation
	c.restart(t, leader)
	t.Logf("%s restarted; leader is %s", leader.Name, c.leader(t).Name)

	done := c.waitGang(ctx, t, sub.GangID, func(g wire.Gang) bool { return g.Status == "done" || g.Status == "failed" })
	if done.Status != "done" {
		t.Fatalf("gang ended %s: %s", done.Status, done.LastError)
	}
	t.Logf("gang done at epoch %d on %v, %s after the start", done.Epoch, done.Workers, time.Since(begin).Round(time.Millisecond))
	if slices.Contains(done.Workers, victim) {
		t.Errorf("the gang finished on %v, which includes the killed worker %s", done.Workers, victim)
	}
	for i, j := range done.Jobs {
		wantAttempts := 1
		if i == 1 {
			wantAttempts = 2 // the failed task's attempt counts; its siblings' are given back
		}
		if j.Status != wire.StatusDone || j.Attempts != wantAttempts {
			t.Errorf("task %d: %s after %d attempts, want done after %d: %s", i, j.Status, j.Attempts, wantAttempts, jobcheck.History(j))
		}
		if !strings.Contains(j.Output, fmt.Sprintf("index=%d size=3", i)) {
			t.Errorf("task %d output %q lacks its gang env", i, j.Output)
		}
		if i != 1 && !strings.Contains(j.Output, fmt.Sprintf("ckpt=ckpt-%d data=", i)) {
			t.Errorf("task %d output %q: its checkpoint did not reach the next attempt (%s)", i, j.Output, jobcheck.History(j))
		}
		if i == 1 && (len(j.AttemptHistory) == 0 || j.AttemptHistory[0].WorkerID != victim) {
			t.Errorf("task 1's first attempt was not on %s: %s", victim, jobcheck.History(j))
		}
	}
	c.checkNodesAgree(t, done.Tasks, done.Jobs)
	for _, n := range c.Nodes {
		if !n.Running() {
			t.Errorf("node %s exited; see its log", n.Name)
		}
	}
	for id, w := range workers {
		if id != victim && !w.Running() {
			t.Errorf("worker %s exited; see its log", id)
		}
	}
	t.Logf("end-to-end gang run took %s", time.Since(begin).Round(time.Millisecond))
}

// post sends body as JSON to a random live node, resending on 503, 502, 504 and
// transport errors, and decodes a 2xx reply into out.
func (c *cluster) post(ctx context.Context, t *testing.T, path string, body, out any) (int, string) {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			status, raw, err := c.send(ctx, http.MethodPost, n.URL+path, body, out)
			if err != nil || status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
				last = fmt.Sprintf("%s: %d %v %s", n.Name, status, err, raw)
				continue
			}
			return status, raw
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("POST %s: no node took it: %s", path, last)
	return 0, ""
}

// waitGang polls GET /gangs/{id} through live nodes until cond holds.
func (c *cluster) waitGang(ctx context.Context, t *testing.T, id string, cond func(wire.Gang) bool) wire.Gang {
	t.Helper()
	var (
		g    wire.Gang
		last string
	)
	ok := poll.True(ctx, 0, 50*time.Millisecond, func() bool {
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			var got wire.Gang
			status, raw, err := c.Get(ctx, n.URL+"/gangs/"+id, &got)
			if err != nil || status != http.StatusOK {
				last = fmt.Sprintf("%s: %d %v %s", n.Name, status, err, raw)
				continue
			}
			g, last = got, fmt.Sprintf("%s at epoch %d on %v (%s)", got.Status, got.Epoch, got.Workers, got.LastError)
			return cond(g)
		}
		return false
	}) == nil
	if !ok {
		t.Fatalf("gang %s: condition not met in time; last: %s", id, last)
	}
	return g
}

// waitActiveWorkers waits until GET /workers shows n active workers.
func (c *cluster) waitActiveWorkers(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	var last string
	ok := poll.True(ctx, 0, 100*time.Millisecond, func() bool {
		var list wire.WorkerList
		status, raw, err := c.Get(ctx, c.Nodes[0].URL+"/workers", &list)
		if err != nil || status != http.StatusOK {
			last = fmt.Sprintf("%d %v %s", status, err, raw)
			return false
		}
		active := 0
		for _, w := range list.Workers {
			if w.Status == "active" && w.Resources.VRAMMB == 8000 && slices.Contains(w.Tags, "gpu") {
				active++
			}
		}
		last = fmt.Sprintf("%d of %d workers active with their resources", active, len(list.Workers))
		return active == n
	}) == nil
	if !ok {
		t.Fatalf("workers: %s", last)
	}
}

// send makes one request with a JSON body and decodes a 2xx reply.
func (c *cluster) send(ctx context.Context, method, url string, body, out any) (int, string, error) {
	data, err := jsonBody(body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, data)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := readJSON(resp, out)
	return resp.StatusCode, raw, err
}

// pidFiles counts the task runs that recorded their process group.
func pidFiles(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "pid.*"))
	return len(m)
}

// killTaskGroup SIGKILLs the process groups of a task's runs, as if their
// machine died with their worker.
func killTaskGroup(dir, jobID string) {
	m, _ := filepath.Glob(filepath.Join(dir, "pid."+jobID+".*"))
	for _, f := range m {
		killGroupIn(f)
	}
}

// killTaskGroups ends whatever task processes are left.
func killTaskGroups(dir string) {
	m, _ := filepath.Glob(filepath.Join(dir, "pid.*"))
	for _, f := range m {
		killGroupIn(f)
	}
}

func killGroupIn(pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// readJSON reads a reply and decodes a 2xx one into out (when not nil).
func readJSON(resp *http.Response, out any) (string, error) {
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return string(raw), err
		}
	}
	return string(raw), nil
}
