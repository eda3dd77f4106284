package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// followerNode follows n2.
type followerNode struct{ *loneNode }

func (n *followerNode) IsLeader() bool           { return false }
func (n *followerNode) Leader() (string, string) { return "n2", "127.0.0.1:2" }
func (n *followerNode) Role() string             { return "follower" }

// readLeader is n2: it answers GET /cluster/read_index as told (404: a
// release without it) and serves GET /jobs itself, recording both.
type readLeader struct {
	mu     sync.Mutex
	status int    // of GET /cluster/read_index
	index  uint64 // its commit_index
	asked  []http.Header
	lists  int
}

func (l *readLeader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch r.URL.Path {
	case "/cluster/read_index":
		l.asked = append(l.asked, r.Header.Clone())
		if l.status != http.StatusOK {
			writeError(w, wire.CodeNotFound, "no route GET /cluster/read_index")
			return
		}
		writeJSON(w, http.StatusOK, wire.ReadIndex{NodeID: "n2", CommitIndex: l.index})
	case "/jobs":
		l.lists++
		writeJSON(w, http.StatusOK, wire.JobList{Jobs: []wire.Job{{ID: "on-n2", Status: wire.StatusPending, Queue: "default", MaxAttempts: 3, MaxRetries: 3}}})
	default:
		http.NotFound(w, r)
	}
}

// TestConsistentReadOnAFollower: a follower serves a consistent read from
// its own state once it has applied the index the leader gives, passing
// the client's credentials to the leader; answers 503 catching_up when it
// cannot apply that far within the bound; and forwards the read to a
// leader of a release that gives no read index.
func TestConsistentReadOnAFollower(t *testing.T) {
	n2 := &readLeader{status: http.StatusOK}
	srv := httptest.NewServer(n2)
	t.Cleanup(srv.Close)
	env := newSchedEnv(t, time.Now(), func(cfg *Config) {
		cfg.Node = &followerNode{loneNode: cfg.Node.(*loneNode)}
		cfg.LeaderWait = 0 // a consistent read still waits minReadWait
	})
	t.Cleanup(env.srv.client.Transport.(*http.Transport).CloseIdleConnections)
	t.Cleanup(env.srv.proxy.Transport.(*http.Transport).CloseIdleConnections)
	if _, err := env.node.Propose(t.Context(), fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: "n2", HTTP: srv.URL, Raft: "127.0.0.1:2"}}); err != nil {
		t.Fatal(err)
	}
	sub, err := env.node.Propose(t.Context(), fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "echo"}}}})
	if err != nil || len(sub.Jobs) != 1 {
		t.Fatalf("submit: %v %+v", err, sub)
	}
	here := sub.Jobs[0].ID
	applied := env.node.FSM.Applied()
	get := func(path string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer client-token")
		rec := httptest.NewRecorder()
		env.h.ServeHTTP(rec, req)
		return rec
	}
	listed := func(rec *httptest.ResponseRecorder) string {
		t.Helper()
		var l wire.JobList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || len(l.Jobs) != 1 {
			t.Fatalf("HTTP %d %s: want one job", rec.Code, rec.Body)
		}
		return l.Jobs[0].ID
	}

	t.Run("ServedHereOnceApplied", func(t *testing.T) {
		n2.mu.Lock()
		n2.index = applied
		n2.mu.Unlock()
		rec := get("/jobs")
		if rec.Code != http.StatusOK || listed(rec) != here {
			t.Fatalf("HTTP %d %s: want this node's job", rec.Code, rec.Body)
		}
		want := strconv.FormatUint(applied, 10)
		if a, c := rec.Header().Get(wire.HeaderAppliedIndex), rec.Header().Get(wire.HeaderLeaderCommit); a != want || c != want {
			t.Errorf("applied %q, leader commit %q: want both %s", a, c, want)
		}
		n2.mu.Lock()
		defer n2.mu.Unlock()
		if n2.lists != 0 || len(n2.asked) != 1 {
			t.Fatalf("the leader served %d lists and %d read indexes, want 0 and 1", n2.lists, len(n2.asked))
		}
		h := n2.asked[0]
		if h.Get("Authorization") != "Bearer client-token" || h.Get(headerForwarded) != "n1" {
			t.Errorf("the read index request carried Authorization %q, %s %q: want the client's token and this node's id",
				h.Get("Authorization"), headerForwarded, h.Get(headerForwarded))
		}
	})

	t.Run("LeaderAheadIsCatchingUp", func(t *testing.T) {
		n2.mu.Lock()
		n2.index = applied + 5
		n2.mu.Unlock()
		rec := get("/jobs/" + here)
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("HTTP %d %s: want 503", rec.Code, rec.Body)
		}
		var we wire.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &we); err != nil || we.Code != wire.CodeCatchingUp {
			t.Fatalf("%s: want code %s", rec.Body, wire.CodeCatchingUp)
		}
		if c := rec.Header().Get(wire.HeaderLeaderCommit); c != strconv.FormatUint(applied+5, 10) {
			t.Errorf("leader commit %q, want %d", c, applied+5)
		}
		// Stale serves at once, asking no one.
		n2.mu.Lock()
		asked := len(n2.asked)
		n2.mu.Unlock()
		if rec := get("/jobs/" + here + "?stale=true"); rec.Code != http.StatusOK {
			t.Fatalf("stale read: HTTP %d %s", rec.Code, rec.Body)
		}
		n2.mu.Lock()
		defer n2.mu.Unlock()
		if len(n2.asked) != asked {
			t.Error("a stale read asked the leader for its read index")
		}
	})

	t.Run("OlderLeaderIsForwardedTheRead", func(t *testing.T) {
		n2.mu.Lock()
		n2.status = http.StatusNotFound
		n2.mu.Unlock()
		rec := get("/jobs")
		if rec.Code != http.StatusOK || listed(rec) != "on-n2" {
			t.Fatalf("HTTP %d %s: want the leader's reply", rec.Code, rec.Body)
		}
		n2.mu.Lock()
		defer n2.mu.Unlock()
		if n2.lists != 1 {
			t.Errorf("the leader served %d lists, want 1", n2.lists)
		}
	})

	t.Run("BadStaleIsRefused", func(t *testing.T) {
		if rec := get("/jobs?stale=maybe"); rec.Code != http.StatusBadRequest {
			t.Fatalf("HTTP %d %s: want 400 naming stale", rec.Code, rec.Body)
		}
	})
}
