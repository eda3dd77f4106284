package api_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestClusterShowsEachNodesHealth checks GET /cluster's per-node health: the
// serving node probes every member's /health at once, with a short timeout,
// so a member that is down or hangs shows as unreachable without holding up
// the answer.
func TestClusterShowsEachNodesHealth(t *testing.T) {
	c := clustertest.New(t, 3)
	hc := httpClient(t)
	leader := c.Leader(t)
	followers := c.Followers(t)

	cluster := func(t *testing.T, i int) wire.Cluster {
		t.Helper()
		return decodeJSON[wire.Cluster](t, doHTTP(t, hc, http.StatusOK, "GET", c.URL(i)+"/cluster", nil))
	}
	byID := func(cl wire.Cluster) map[string]wire.Node {
		out := make(map[string]wire.Node)
		for _, n := range cl.Nodes {
			out[n.ID] = n
		}
		return out
	}

	t.Run("EveryMemberAnswersWithItsRoleAndIndex", func(t *testing.T) {
		cl := cluster(t, followers[0])
		if len(cl.Nodes) != 3 {
			t.Fatalf("%d nodes, want 3: %+v", len(cl.Nodes), cl.Nodes)
		}
		for _, n := range cl.Nodes {
			h := n.Health
			if h == nil || !h.Reachable || h.Status != "ok" || h.AppliedIndex == 0 || h.Term == 0 || h.Role != n.Role {
				t.Errorf("node %s (%s): health %+v", n.ID, n.Role, h)
			}
		}
		if got := byID(cl)[c.Node(leader).ID()].Health.Role; got != "leader" {
			t.Errorf("the leader reports itself as %q", got)
		}
	})

	t.Run("AMemberThatHangsIsUnreachableAfterTheProbeTimeout", func(t *testing.T) {
		silent := hangingServer(t)
		doHTTP(t, hc, http.StatusOK, "POST", c.URL(leader)+"/cluster/join",
			wire.JoinRequest{ID: "silent", Raft: "127.0.0.1:1", HTTP: "http://" + silent})
		t.Cleanup(func() { doHTTP(t, hc, http.StatusOK, "DELETE", c.URL(c.Leader(t))+"/cluster/nodes/silent", nil) })
		var cl wire.Cluster
		clustertest.WaitFor(t, 5*time.Second, func() error {
			cl = cluster(t, leader)
			if _, ok := byID(cl)["silent"]; !ok {
				return errString("the new member is not listed yet")
			}
			return nil
		})
		start := time.Now()
		cl = cluster(t, leader)
		took := time.Since(start)
		h := byID(cl)["silent"].Health
		if h == nil || h.Reachable || !strings.Contains(h.Error, "no answer within") {
			t.Fatalf("silent member's health: %+v", h)
		}
		// The probe gives up after its timeout, not the client's 10 s.
		if took > api.HealthProbeTimeout+3*time.Second {
			t.Errorf("GET /cluster took %s with a hanging member", took)
		}
		for _, n := range cl.Nodes {
			if n.ID != "silent" && (n.Health == nil || !n.Health.Reachable) {
				t.Errorf("node %s: health %+v", n.ID, n.Health)
			}
		}
	})

	t.Run("AStoppedMemberIsUnreachable", func(t *testing.T) {
		down := followers[1]
		c.Kill(t, down)
		defer c.Restart(t, down)
		h := byID(cluster(t, leader))[c.Node(down).ID()].Health
		if h == nil || h.Reachable || h.Error == "" {
			t.Fatalf("stopped member's health: %+v", h)
		}
	})
}

// TestRemoveNode checks DELETE /cluster/nodes/{id} of a follower and of the
// only voter (removing a leader runs against the real binary in
// cmd/workron's TestRemovingTheLeader).
func TestRemoveNode(t *testing.T) {
	hc := httpClient(t)

	t.Run("AFollowerIsRemovedAndSaysSo", func(t *testing.T) {
		c := clustertest.New(t, 3)
		leader := c.Leader(t)
		f := c.Followers(t)[0]
		id := c.Node(f).ID()
		rm := decodeJSON[wire.Removal](t, doHTTP(t, hc, http.StatusOK, "DELETE", c.URL(leader)+"/cluster/nodes/"+id, nil))
		want := wire.Removal{Removed: id, Leader: c.Node(leader).ID(), Message: c.Node(leader).ID() + " removed " + id + " from the cluster"}
		if rm != want {
			t.Fatalf("reply %+v, want %+v", rm, want)
		}
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if !c.Node(f).Raft().Removed() {
				sv, _ := c.Node(f).Raft().Servers()
				l, _ := c.Node(f).Raft().Leader()
				return fmt.Errorf("the removed node does not know yet: servers %+v, leader %q", sv, l)
			}
			return nil
		})
		h := decodeJSON[wire.Health](t, doHTTP(t, hc, http.StatusServiceUnavailable, "GET", c.URL(f)+"/health", nil))
		if h.Status != "removed" {
			t.Errorf("removed node's /health: %+v", h)
		}
		for _, r := range []struct{ method, path string }{{"GET", "/jobs"}, {"POST", "/jobs"}, {"GET", "/cluster"}} {
			e := decodeJSON[wire.Error](t, doHTTP(t, hc, http.StatusServiceUnavailable, r.method, c.URL(f)+r.path, wire.SubmitRequest{Command: "true"}))
			if e.Code != "removed" || !strings.Contains(e.Error, c.URL(leader)) {
				t.Errorf("%s %s on the removed node: %+v", r.method, r.path, e)
			}
		}
		// Its own state and metrics stay readable.
		doHTTP(t, hc, http.StatusOK, "GET", c.URL(f)+"/metrics", nil)
		c.Kill(t, f) // it no longer agrees on a leader, which the cleanup would check
	})

	t.Run("TheOnlyVoterIsNotRemoved", func(t *testing.T) {
		c := clustertest.New(t, 1)
		e := decodeJSON[wire.Error](t, doHTTP(t, hc, http.StatusConflict, "DELETE", c.URL(0)+"/cluster/nodes/n1", nil))
		if e.Code != "conflict" || !strings.Contains(e.Error, "only voter") {
			t.Errorf("reply %+v", e)
		}
		doHTTP(t, hc, http.StatusCreated, "POST", c.URL(0)+"/jobs", wire.SubmitRequest{Command: "true"})
	})
}

type errString string

func (e errString) Error() string { return string(e) }

// hangingServer accepts connections and never answers until the test ends;
// it returns its address.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
