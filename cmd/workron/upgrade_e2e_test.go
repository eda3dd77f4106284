//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/poll"
)

// TestRollingUpgradeWithTwoVersions runs a rolling upgrade with two builds of
// the binary: the old one is built with the workron_protocol1 tag, so it
// runs protocol 1 and does not know retry_deps (the op of POST
// /jobs/{id}/retry with its default cascade), as the releases before it.
// An upgraded node leads while the other two are old: the cascade retry is
// refused with 503 upgrade_in_progress and nothing is proposed, so the old
// nodes keep applying and the cluster keeps serving. The upgraded node is
// rolled back, then all three are upgraded, and the retry goes through on
// every node.
func TestRollingUpgradeWithTwoVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: builds a second binary and restarts three processes")
	}
	if fsm.ProtocolVersion < 2 {
		t.Skip("the test binary is itself of protocol 1")
	}
	newBin, oldBin := workronBinary(t), protocol1Binary(t)
	c := startCluster(t, oldBin, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A parent and its dependent, both cancelled by the parent's cancel.
	var parent, child wire.Job
	c.post(ctx, t, "/jobs", wire.SubmitRequest{Command: "true", Queue: "upgrade"}, &parent)
	c.post(ctx, t, "/jobs", wire.SubmitRequest{Command: "true", Queue: "upgrade", DependsOn: []string{parent.ID}}, &child)
	c.post(ctx, t, "/jobs/"+parent.ID+"/cancel", nil, nil)
	c.waitJobEverywhere(ctx, t, child.ID, wire.StatusCancelled)
	c.waitProtocols(ctx, t, 1, map[string]int{"n1": 1, "n2": 1, "n3": 1})

	// One node upgraded, and leading: the leader crashed after its upgrade.
	up := c.followerOf(t)
	c.replace(t, up, newBin)
	c.makeLeader(t, up)
	c.waitProtocols(ctx, t, 1, map[string]int{up.Name: fsm.ProtocolVersion})
	t.Logf("%s upgraded and leading; the others run protocol 1", up.Name)

	status, raw, err := c.send(ctx, http.MethodPost, up.URL+"/jobs/"+parent.ID+"/retry", nil, nil)
	var e wire.Error
	_ = json.Unmarshal([]byte(raw), &e)
	if err != nil || status != http.StatusServiceUnavailable || e.Code != "upgrade_in_progress" {
		t.Fatalf("cascade retry on a mixed cluster: %d %v %s, want 503 upgrade_in_progress", status, err, raw)
	}
	t.Logf("cascade retry on a mixed cluster: %d %s", status, raw)
	c.checkServes(ctx, t)
	c.waitJobEverywhere(ctx, t, parent.ID, wire.StatusCancelled) // nothing was done

	// Roll the upgraded node back while the cluster runs protocol 1.
	c.replace(t, up, oldBin)
	c.leader(t)
	c.waitProtocols(ctx, t, 1, map[string]int{up.Name: 1})
	c.checkServes(ctx, t)
	t.Logf("%s rolled back", up.Name)

	// The whole rolling upgrade: followers first, the leader last.
	leader := c.leader(t)
	for _, n := range c.Nodes {
		if n != leader {
			c.replace(t, n, newBin)
		}
	}
	c.replace(t, leader, newBin)
	c.leader(t)
	v := fsm.ProtocolVersion
	c.waitProtocols(ctx, t, v, map[string]int{"n1": v, "n2": v, "n3": v})

	var retried wire.Job
	if status, raw := c.post(ctx, t, "/jobs/"+parent.ID+"/retry", nil, &retried); status != http.StatusOK || retried.Status != wire.StatusPending {
		t.Fatalf("cascade retry once every node is upgraded: %d %s", status, raw)
	}
	c.waitJobEverywhere(ctx, t, child.ID, wire.StatusBlocked)
	c.checkServes(ctx, t)
}

// protocol1Binary builds ./cmd/workron with the workron_protocol1 tag: a
// binary of protocol 1.
func protocol1Binary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "workron-protocol1")
	out, err := exec.Command("go", "build", "-tags", "workron_protocol1", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -tags workron_protocol1: %v\n%s", err, out)
	}
	return bin
}

// stopProc sends SIGTERM (a graceful stop: a leader hands leadership over
// first) and waits for the process to exit.
func stopProc(t *testing.T, p *proc) {
	t.Helper()
	done := p.Exited()
	if !p.Signal(syscall.SIGTERM) {
		return
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30s of SIGTERM", p.Name)
	}
}

// replace stops n, and starts it again with bin on the same data.
func (c *cluster) replace(t *testing.T, n *node, bin string) {
	t.Helper()
	stopProc(t, &n.Proc)
	n.Bin = bin
	c.restart(t, n)
}

// followerOf returns a node that does not lead.
func (c *cluster) followerOf(t *testing.T) *node {
	t.Helper()
	leader := c.leader(t)
	for _, n := range c.Nodes {
		if n != leader {
			return n
		}
	}
	t.Fatal("no follower")
	return nil
}

// makeLeader SIGKILLs and restarts whichever other node leads until n
// wins an election.
func (c *cluster) makeLeader(t *testing.T, n *node) {
	t.Helper()
	for range 30 {
		leader := c.leader(t)
		if leader == n {
			return
		}
		leader.Kill()
		c.restart(t, leader)
	}
	t.Fatalf("%s did not win any of 30 elections", n.Name)
}

// waitProtocols waits until the leader's GET /cluster shows the cluster at
// protocol want and the given nodes at theirs.
func (c *cluster) waitProtocols(ctx context.Context, t *testing.T, want int, nodes map[string]int) {
	t.Helper()
	var last string
	ok := poll.True(ctx, 0, 100*time.Millisecond, func() bool {
		var cl wire.Cluster
		status, raw, err := c.Get(ctx, c.leader(t).URL+"/cluster", &cl)
		if err != nil || status != http.StatusOK {
			last = fmt.Sprintf("%d %v %s", status, err, raw)
			return false
		}
		last = fmt.Sprintf("cluster protocol %d, nodes %s", cl.Protocol, raw)
		if max(cl.Protocol, 1) != want {
			return false
		}
		for _, m := range cl.Nodes {
			if p, ok := nodes[m.ID]; ok && (m.Health == nil || max(m.Health.Protocol, 1) != p) {
				return false
			}
		}
		return true
	}) == nil
	if !ok {
		t.Fatalf("protocols not as wanted (cluster %d, nodes %v): %s", want, nodes, last)
	}
}

// waitJobEverywhere waits until every node's own replica holds job id in
// the given status.
func (c *cluster) waitJobEverywhere(ctx context.Context, t *testing.T, id, status string) {
	t.Helper()
	var seen []string
	ok := poll.True(ctx, 0, 50*time.Millisecond, func() bool {
		seen = seen[:0]
		for _, n := range c.Nodes {
			var j wire.Job
			code, _, err := c.Get(ctx, n.URL+"/jobs/"+id+"?stale=1", &j)
			if err != nil || code != http.StatusOK {
				seen = append(seen, fmt.Sprintf("%s: %d %v", n.Name, code, err))
				continue
			}
			seen = append(seen, n.Name+": "+j.Status)
		}
		return !slices.ContainsFunc(seen, func(s string) bool { return s[len(s)-len(status):] != status })
	}) == nil
	if !ok {
		t.Fatalf("job %s not %s on every node: %v", id, status, seen)
	}
}

// checkServes submits a job, waits until every node has applied it, checks
// that every node still runs, and compares their states.
func (c *cluster) checkServes(ctx context.Context, t *testing.T) {
	t.Helper()
	var j wire.Job
	if status, raw := c.post(ctx, t, "/jobs", wire.SubmitRequest{Command: "true", Queue: "upgrade"}, &j); status/100 != 2 {
		t.Fatalf("submit: %d %s", status, raw)
	}
	c.waitJobEverywhere(ctx, t, j.ID, wire.StatusPending)
	c.checkAlive(t)
	if t.Failed() {
		t.FailNow()
	}
	c.checkDigests(ctx, t)
}

// checkDigests waits until every node's GET /debug/digest shows the same
// applied index, and checks that they show the same digest there and a
// sound store: nodes of both builds hold the same state.
func (c *cluster) checkDigests(ctx context.Context, t *testing.T) {
	t.Helper()
	var ds []wire.Digest
	ok := poll.True(ctx, 0, 50*time.Millisecond, func() bool {
		ds = ds[:0]
		for _, n := range c.Nodes {
			var d wire.Digest
			if code, _, err := c.Get(ctx, n.URL+"/debug/digest", &d); err != nil || code != http.StatusOK {
				return false
			}
			ds = append(ds, d)
		}
		return !slices.ContainsFunc(ds, func(d wire.Digest) bool { return d.AppliedIndex != ds[0].AppliedIndex })
	}) == nil
	if !ok {
		t.Fatalf("nodes did not reach one applied index: %+v", ds)
	}
	for _, d := range ds {
		if d.Digest != ds[0].Digest || d.Check != "ok" {
			t.Errorf("at index %d: %s has digest %s (check %s), %s has %s", d.AppliedIndex, d.NodeID, d.Digest, d.Check, ds[0].NodeID, ds[0].Digest)
		}
	}
}
