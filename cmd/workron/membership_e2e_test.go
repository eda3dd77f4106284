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
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/store"
)

// TestRemovingTheLeader runs three server processes and removes the leader
// with `workron cluster remove`, sent to a follower: the leader hands
// leadership over, the new leader removes it (and writes the state's record
// of it), the reply says so, the two left keep serving, and the removed
// process answers 503 removed, also after a restart, without joining again.
func TestRemovingTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts three server processes")
	}
	bin := workronBinary(t)
	c := startCluster(t, bin, t.TempDir())
	old := c.leader(t)
	var rest []*node
	for _, n := range c.Nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitMembersKnown(t, c, old, 3)
	before := submitVia(t, c, rest[0].URL, http.StatusCreated)

	// Submits run through the other follower meanwhile, to measure (not
	// assert) how long the cluster could not take writes.
	stopLoad := make(chan struct{})
	loadDone := make(chan string, 1)
	go func() { loadDone <- submitsDuring(c, rest[1].URL, stopLoad) }()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "cluster", "remove", old.Name, "--server", rest[0].URL).CombinedOutput()
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond) // a little load after the removal too
	close(stopLoad)
	t.Logf("submits via %s during the removal: %s", rest[1].Name, <-loadDone)
	if err != nil {
		t.Fatalf("workron cluster remove %s: %v\n%s", old.Name, err, out)
	}
	t.Logf("workron cluster remove %s took %s: %s", old.Name, took.Round(time.Millisecond), bytes.TrimSpace(out))
	want := fmt.Sprintf("%s led: it handed leadership to ", old.Name)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "which removed "+old.Name+" from the cluster") {
		t.Fatalf("the reply does not say leadership moved and %s was removed: %s", old.Name, out)
	}

	c.Nodes = rest // c.leader and the cleanup see only the members now
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- last lines of %s (%s) ---\n%s", old.Name, old.Log, old.Tail(40))
		}
		old.Kill()
	})

	t.Run("TheOthersServeUnderANewLeader", func(t *testing.T) {
		nl := c.leader(t)
		if nl == old {
			t.Fatalf("%s still leads", old.Name)
		}
		for _, n := range rest {
			submitVia(t, c, n.URL, http.StatusCreated)
		}
		var j wire.Job
		if status, body, err := c.Get(ctx, nl.URL+"/jobs/"+before, &j); err != nil || status != http.StatusOK {
			t.Fatalf("GET the job submitted before the removal: %d %s %v", status, body, err)
		}
		var cl wire.Cluster
		if status, body, err := c.Get(ctx, nl.URL+"/cluster", &cl); err != nil || status != http.StatusOK {
			t.Fatalf("GET /cluster: %d %s %v", status, body, err)
		}
		if len(cl.Nodes) != 2 || slices.ContainsFunc(cl.Nodes, func(n wire.Node) bool { return n.ID == old.Name }) {
			t.Fatalf("members after the removal: %+v", cl.Nodes)
		}
	})

	t.Run("TheStateHasNoRecordOfTheRemovedNode", func(t *testing.T) {
		nodes := backupNodes(t, c, c.leader(t).URL)
		if slices.ContainsFunc(nodes, func(n *store.Node) bool { return n.ID == old.Name }) || len(nodes) != 2 {
			t.Fatalf("node records in the state: %+v", nodes)
		}
	})

	t.Run("TheRemovedNodeSaysItWasRemoved", func(t *testing.T) {
		waitRemoved(t, c, old)
		status, body := send(t, c, http.MethodPost, old.URL+"/jobs", wire.SubmitRequest{Command: "true"})
		var e wire.Error
		_ = json.Unmarshal(body, &e)
		if status != http.StatusServiceUnavailable || e.Code != "removed" || !strings.Contains(e.Error, "was removed from the cluster") {
			t.Fatalf("submit to the removed node: HTTP %d %s", status, body)
		}
		// The others are named, so a client knows where to go.
		for _, n := range rest {
			if !strings.Contains(e.Error, n.URL) {
				t.Errorf("the removed node's answer does not name %s (%s): %s", n.Name, n.URL, e.Error)
			}
		}
	})

	t.Run("ItStaysRemovedAfterARestart", func(t *testing.T) {
		old.Kill()
		c.restart(t, old)
		// It knows from the start, from its data directory, so it never
		// asks to join again.
		if n := strings.Count(old.Tail(1000), "removed from its cluster (the data directory says so)"); n != 1 {
			t.Fatalf("the restarted node logged its removal at start %d times, want 1:\n%s", n, old.Tail(20))
		}
		waitRemoved(t, c, old)
		var cl wire.Cluster
		if status, _, err := c.Get(ctx, c.leader(t).URL+"/cluster", &cl); err != nil || status != http.StatusOK || len(cl.Nodes) != 2 {
			t.Fatalf("members after the removed node restarted: %+v (%d, %v)", cl.Nodes, status, err)
		}
	})

	t.Run("RemovingItAgainIsNotFound", func(t *testing.T) {
		status, body := send(t, c, http.MethodDelete, rest[0].URL+"/cluster/nodes/"+old.Name, nil)
		if status != http.StatusNotFound {
			t.Fatalf("second removal: HTTP %d %s", status, body)
		}
	})
}

// submitsDuring submits jobs through url one after another until stop is
// closed, and says how many failed and the longest time without a success.
func submitsDuring(c *cluster, url string, stop <-chan struct{}) string {
	var (
		n, failed int
		gap       time.Duration
	)
	last := time.Now()
	body, _ := json.Marshal(wire.SubmitRequest{Command: "true"})
	for {
		select {
		case <-stop:
			return fmt.Sprintf("%d submits, %d not 201, longest time without a success %s", n, failed, max(gap, time.Since(last)).Round(time.Millisecond))
		default:
		}
		n++
		resp, err := c.hc.Post(url+"/jobs", "application/json", bytes.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != http.StatusCreated {
			failed++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		gap, last = max(gap, time.Since(last)), time.Now()
	}
}

// waitMembersKnown waits until the leader's GET /cluster lists n members,
// each with its HTTP address (so every node can forward to every other).
func waitMembersKnown(t *testing.T, c *cluster, leader *node, n int) {
	t.Helper()
	clustertest.WaitFor(t, 15*time.Second, func() error {
		var cl wire.Cluster
		if status, body, err := c.Get(context.Background(), leader.URL+"/cluster", &cl); err != nil || status != http.StatusOK {
			return fmt.Errorf("GET /cluster: %d %s %v", status, body, err)
		}
		if len(cl.Nodes) != n || slices.ContainsFunc(cl.Nodes, func(m wire.Node) bool { return m.HTTP == "" }) {
			return fmt.Errorf("members %+v", cl.Nodes)
		}
		return nil
	})
}

// waitRemoved waits until n's GET /health answers 503 "removed".
func waitRemoved(t *testing.T, c *cluster, n *node) {
	t.Helper()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		status, body := send(t, c, http.MethodGet, n.URL+"/health", nil)
		var h wire.Health
		_ = json.Unmarshal(body, &h)
		if status != http.StatusServiceUnavailable || h.Status != "removed" {
			return fmt.Errorf("%s's /health: HTTP %d %s", n.Name, status, body)
		}
		return nil
	})
}

// submitVia submits a job through url, wanting status, and returns its id.
func submitVia(t *testing.T, c *cluster, url string, want int) string {
	t.Helper()
	status, body := send(t, c, http.MethodPost, url+"/jobs", wire.SubmitRequest{Command: "true"})
	if status != want {
		t.Fatalf("submit via %s: HTTP %d %s, want %d", url, status, body, want)
	}
	var j wire.Job
	_ = json.Unmarshal(body, &j)
	return j.ID
}

// send sends one request with a JSON body (when not nil) and returns the
// status and body.
func send(t *testing.T, c *cluster, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, out
}

// backupNodes takes a backup through url and returns the node records in it.
func backupNodes(t *testing.T, c *cluster, url string) []*store.Node {
	t.Helper()
	status, body := send(t, c, http.MethodGet, url+"/backup", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /backup: HTTP %d", status)
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := fsm.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := f.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}
