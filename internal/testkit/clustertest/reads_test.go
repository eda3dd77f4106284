package clustertest_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// logGate holds a node's writes to its Raft log while it is shut: the node
// then stays a follower (heartbeats need no log write) that knows the
// leader but applies nothing new.
type logGate struct {
	mu   sync.Mutex
	shut chan struct{} // nil while open; closed by open
}

func (g *logGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut == nil {
		g.shut = make(chan struct{})
	}
}

func (g *logGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *logGate) pass() {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		<-shut
	}
}

// readWait is the LeaderWait of the cluster TestReadsOnAnyNode builds: how
// long a consistent read waits before it answers 503.
const readWait = time.Second

// TestReadsOnAnyNode: a follower serves reads from its own state, stating
// how fresh it is; by default only once it has applied the leader's commit
// index (a consistent read, which sees a write made through the leader a
// moment before and refuses, within a bound, when it cannot), with
// ?stale=1 at once, without asking the leader.
func TestReadsOnAnyNode(t *testing.T) {
	gates := make([]*logGate, 3)
	for i := range gates {
		gates[i] = &logGate{}
	}
	c := newCluster(t, 3, clustertest.WithConfig(func(i int, nc *node.Config) {
		nc.API.LeaderWait = readWait
		nc.Raft.BeforeLogWrite = gates[i].pass
	}))
	// Runs before the cluster's cleanup: a held node could not stop.
	t.Cleanup(func() {
		for _, g := range gates {
			g.open()
		}
	})

	t.Run("FollowerServesWithoutTheLeaderServingIt", func(t *testing.T) {
		l, f := c.Leader(t), c.Followers(t)[0]
		job := submit(t, c.URL(l), wire.SubmitRequest{Command: "echo read", Queue: "reads"})
		lists, indexes := requestsAt(t, c.URL(l), "GET /jobs"), requestsAt(t, c.URL(l), "GET /cluster/read_index")

		r := send(t, http.MethodGet, c.URL(f)+"/jobs?queue=reads", nil)
		if r.Status != http.StatusOK || !listsJob(t, r, job.ID) {
			t.Fatalf("consistent GET /jobs on follower %s: %s, want the job %s just submitted", c.Node(f).ID(), r, job.ID)
		}
		applied, commit := freshness(t, r)
		if commit == 0 || applied < commit {
			t.Errorf("consistent read: applied index %d, leader commit %d: want applied >= commit > 0", applied, commit)
		}
		if got := requestsAt(t, c.URL(l), "GET /jobs"); got != lists {
			t.Errorf("the leader served GET /jobs %v times for one read on a follower, want 0", got-lists)
		}
		if got := requestsAt(t, c.URL(l), "GET /cluster/read_index"); got != indexes+1 {
			t.Errorf("the leader was asked its read index %v times for one consistent read, want 1", got-indexes)
		}

		r = send(t, http.MethodGet, c.URL(f)+"/jobs?queue=reads&stale=1", nil)
		if r.Status != http.StatusOK || !listsJob(t, r, job.ID) {
			t.Fatalf("stale GET /jobs on follower: %s", r)
		}
		if a, _ := freshness(t, r); a < applied {
			t.Errorf("stale read's applied index %d is below the consistent read's %d before it", a, applied)
		}
		if got := requestsAt(t, c.URL(l), "GET /cluster/read_index"); got != indexes+1 {
			t.Errorf("a stale read asked the leader (%v read indexes), want none", got-indexes-1)
		}
		if got := requestsAt(t, c.URL(l), "GET /jobs"); got != lists {
			t.Errorf("a stale read on a follower reached the leader")
		}
	})

	t.Run("AppliedIndexIsStatedAndNeverGoesBack", func(t *testing.T) {
		l, f := c.Leader(t), c.Followers(t)[0]
		var lastApplied, lastCommit uint64
		for i := range 5 {
			job := submit(t, c.URL(l), wire.SubmitRequest{Command: fmt.Sprint("echo ", i)})
			// The stale read follows a consistent one on the same node: it
			// has the job too.
			for _, path := range []string{"/jobs/" + job.ID, "/jobs/" + job.ID + "?stale=1", "/jobs/count", "/workers", "/queues", "/schedules", "/pauses"} {
				r := send(t, http.MethodGet, c.URL(f)+path, nil)
				if r.Status != http.StatusOK {
					t.Fatalf("GET %s on follower: %s", path, r)
				}
				applied, commit := freshness(t, r)
				if applied < lastApplied {
					t.Errorf("GET %s: applied index %d went back from %d", path, applied, lastApplied)
				}
				if !strings.Contains(path, "stale") {
					if commit < lastCommit || applied < commit {
						t.Errorf("GET %s: applied %d, leader commit %d (last %d)", path, applied, commit, lastCommit)
					}
					lastCommit = commit
				}
				lastApplied = applied
			}
		}
	})

	t.Run("ConsistentReadWaitsForTheLeadersIndexWithinABound", func(t *testing.T) {
		l, f := c.Leader(t), c.Followers(t)[0]
		gates[f].close()
		defer gates[f].open()
		job := submit(t, c.URL(l), wire.SubmitRequest{Command: "echo behind"})

		// Held: the follower has not the job, and knows the leader.
		if r := send(t, http.MethodGet, c.URL(f)+"/jobs/"+job.ID+"?stale=1", nil); r.Status != http.StatusNotFound {
			t.Fatalf("stale GET on the held follower: %s, want 404 (the job is not applied there)", r)
		}
		// Bounded (readWait): the test client would give up after 30 s.
		r := send(t, http.MethodGet, c.URL(f)+"/jobs/"+job.ID, nil)
		if r.Status != http.StatusServiceUnavailable || decode[wire.Error](t, r).Code != wire.CodeCatchingUp {
			t.Fatalf("consistent GET on the held follower: %s, want 503 %s", r, wire.CodeCatchingUp)
		}
		if applied, commit := freshness(t, r); applied >= commit {
			t.Errorf("503 catching_up states applied %d, leader commit %d: want applied below it", applied, commit)
		}

		// Let go while a consistent read waits: it serves the job.
		done := make(chan reply, 1)
		go func() {
			r, err := try(http.MethodGet, c.URL(f)+"/jobs/"+job.ID, nil)
			if err != nil {
				r = reply{Body: []byte(err.Error())}
			}
			done <- r
		}()
		gates[f].open()
		r = <-done
		if r.Status != http.StatusOK || decode[wire.Job](t, r).ID != job.ID {
			t.Fatalf("consistent GET after the follower caught up: %s", r)
		}
	})

	// Last: it leaves one node alone.
	t.Run("CutOffFollowerRefusesConsistentAndServesStale", func(t *testing.T) {
		l, f := c.Leader(t), c.Followers(t)[0]
		job := submit(t, c.URL(l), wire.SubmitRequest{Command: "echo before the cut", Queue: "cut"})
		clustertest.WaitFor(t, 5*time.Second, func() error {
			if r := send(t, http.MethodGet, c.URL(f)+"/jobs/"+job.ID+"?stale=1", nil); r.Status != http.StatusOK {
				return fmt.Errorf("not on %s yet: %s", c.Node(f).ID(), r)
			}
			return nil
		})
		for i := range c.Len() {
			if i != f && i != l {
				c.Kill(t, i)
			}
		}
		c.Kill(t, l)
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if id, _ := c.Node(f).Raft().Leader(); id != "" {
				return fmt.Errorf("%s still knows leader %s", c.Node(f).ID(), id)
			}
			return nil
		})

		r := send(t, http.MethodGet, c.URL(f)+"/jobs?queue=cut", nil)
		if r.Status != http.StatusServiceUnavailable || decode[wire.Error](t, r).Code != wire.CodeNoLeader {
			t.Fatalf("consistent GET on a cut-off node: %s, want 503 %s", r, wire.CodeNoLeader)
		}
		r = send(t, http.MethodGet, c.URL(f)+"/jobs?queue=cut&stale=1", nil)
		if r.Status != http.StatusOK || !listsJob(t, r, job.ID) {
			t.Fatalf("stale GET on a cut-off node: %s, want its state with job %s", r, job.ID)
		}
		if applied, commit := freshness(t, r); applied == 0 || commit == 0 || applied != c.Node(f).Raft().AppliedIndex() {
			t.Errorf("stale read states applied %d, leader commit %d; the node stands at %d", applied, commit, c.Node(f).Raft().AppliedIndex())
		}
	})
}

// freshness reads a read reply's applied index and leader commit (0 when
// absent); the applied index must be there.
func freshness(tb testing.TB, r reply) (applied, commit uint64) {
	tb.Helper()
	a, err := strconv.ParseUint(r.Header.Get(wire.HeaderAppliedIndex), 10, 64)
	if err != nil {
		tb.Fatalf("%s: %s: %v", r, wire.HeaderAppliedIndex, err)
	}
	if v := r.Header.Get(wire.HeaderLeaderCommit); v != "" {
		if commit, err = strconv.ParseUint(v, 10, 64); err != nil {
			tb.Fatalf("%s: %s: %v", r, wire.HeaderLeaderCommit, err)
		}
	}
	return a, commit
}

func listsJob(tb testing.TB, r reply, id string) bool {
	tb.Helper()
	for _, j := range decode[wire.JobList](tb, r).Jobs {
		if j.ID == id {
			return true
		}
	}
	return false
}

// requestsAt is how many requests for route the node at url has served,
// from its workron_http_requests_total.
func requestsAt(tb testing.TB, url, route string) float64 {
	tb.Helper()
	r := send(tb, http.MethodGet, url+"/metrics", nil)
	if r.Status != http.StatusOK {
		tb.Fatalf("GET /metrics: %s", r)
	}
	var n float64
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "workron_http_requests_total{") || !strings.Contains(line, `route="`+route+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			tb.Fatalf("metrics line %q: %v", line, err)
		}
		n += v
	}
	return n
}
