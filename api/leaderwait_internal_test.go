package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// steppingNode leads until its first submit, which finds that it just lost
// the leadership to n2 (ErrNotLeader: nothing was proposed).
type steppingNode struct {
	*loneNode
	deposed atomic.Bool
}

func (n *steppingNode) IsLeader() bool { return !n.deposed.Load() }

func (n *steppingNode) Leader() (string, string) {
	if n.deposed.Load() {
		return "n2", "127.0.0.1:2"
	}
	return "n1", "127.0.0.1:1"
}

func (n *steppingNode) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	if cmd.Op == fsm.OpSubmit && !n.deposed.Swap(true) {
		return fsm.Result{}, raftnode.ErrNotLeader
	}
	return n.loneNode.Propose(ctx, cmd)
}

// leaderTap is n2, the new leader: it records what it is sent.
type leaderTap struct {
	mu      sync.Mutex
	bodies  []string
	forward []string // X-Workron-Forwarded of each request
}

func (l *leaderTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	l.bodies = append(l.bodies, string(b))
	l.forward = append(l.forward, r.Header.Get(headerForwarded))
	l.mu.Unlock()
	writeJSON(w, http.StatusCreated, wire.Job{ID: "job-1", Status: wire.StatusPending, Queue: "default", MaxAttempts: 3, MaxRetries: 3})
}

// TestRequestOnADeposedLeaderIsServedByTheNextOne: a submit whose proposal
// found that this node had just lost the leadership (nothing was done) is
// sent on to the new leader within LeaderWait, body and all, rather than
// answered 503; a request that a peer forwarded is left to that peer.
func TestRequestOnADeposedLeaderIsServedByTheNextOne(t *testing.T) {
	setup := func(t *testing.T) (*schedEnv, *leaderTap) {
		tap := &leaderTap{}
		n2 := httptest.NewServer(tap)
		t.Cleanup(n2.Close)
		var node *steppingNode
		env := newSchedEnv(t, time.Now(), func(cfg *Config) {
			node = &steppingNode{loneNode: cfg.Node.(*loneNode)}
			cfg.Node = node
			cfg.LeaderWait = 10 * time.Second
		})
		t.Cleanup(env.srv.proxy.Transport.(*http.Transport).CloseIdleConnections)
		if _, err := node.loneNode.Propose(t.Context(), fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: "n2", HTTP: n2.URL, Raft: "127.0.0.1:2"}}); err != nil {
			t.Fatal(err)
		}
		return env, tap
	}
	const body = `{"command":"echo moved","idempotency_key":"moved"}`

	t.Run("AClientRequestGoesToTheNewLeader", func(t *testing.T) {
		env, tap := setup(t)
		if code, werr := env.do(http.MethodPost, "/jobs", body, nil); code != http.StatusCreated {
			t.Fatalf("submit on a leader that just stepped down: want the new leader's 201, got %d %+v", code, werr)
		}
		tap.mu.Lock()
		defer tap.mu.Unlock()
		if len(tap.bodies) != 1 || tap.bodies[0] != body || tap.forward[0] != "n1" {
			t.Fatalf("the new leader got bodies %q forwarded by %q, want the submit once from n1", tap.bodies, tap.forward)
		}
	})
	t.Run("AForwardedRequestIsLeftToThePeerThatSentIt", func(t *testing.T) {
		env, tap := setup(t)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/jobs", strings.NewReader(body))
		req.Header.Set(headerForwarded, "n3")
		env.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("a forwarded submit on a deposed leader: want 503, got %d %s", rec.Code, rec.Body)
		}
		tap.mu.Lock()
		defer tap.mu.Unlock()
		if len(tap.bodies) != 0 {
			t.Fatalf("a forwarded request was forwarded again: %q", tap.bodies)
		}
	})
}

func TestLeaderWaitConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.LeaderWait != 5*time.Second {
		t.Errorf("default LeaderWait = %s, want 5s", cfg.LeaderWait)
	}
	cfg.Node, cfg.State, cfg.AdvertiseHTTP = &loneNode{}, &fsm.FSM{}, "http://127.0.0.1:1"
	for _, d := range []time.Duration{0, time.Minute} {
		cfg.LeaderWait = d
		if err := cfg.Validate(); err != nil {
			t.Errorf("LeaderWait %s: %v", d, err)
		}
	}
	for _, d := range []time.Duration{-time.Second, 2 * time.Minute} {
		cfg.LeaderWait = d
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "LeaderWait") {
			t.Errorf("LeaderWait %s: got %v, want an error naming LeaderWait", d, err)
		}
	}
}
