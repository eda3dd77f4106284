package clustertest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// TestLeaderWait: a request that needs the leader, sent while its node
// knows none, waits for the election instead of getting 503.
func TestLeaderWait(t *testing.T) {
	c := newCluster(t, 3, clustertest.WithConfig(func(_ int, nc *node.Config) {
		nc.API.LeaderWait = 20 * time.Second // far beyond an election: the test asserts no latency
	}))

	t.Run("WriteThroughALeaderlessFollowerSucceedsAfterTheElection", func(t *testing.T) {
		c.Kill(t, c.Leader(t))
		stopped := c.Leader(t) // leadership moved to one of the two left
		c.Kill(t, stopped)
		alone := -1
		for i := range c.Len() {
			if c.Node(i).Running() {
				alone = i
			}
		}
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if id, _ := c.Node(alone).Raft().Leader(); id != "" {
				return fmt.Errorf("%s still follows %s", c.Node(alone).ID(), id)
			}
			return nil
		})

		type result struct {
			r   reply
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := try(http.MethodPost, c.URL(alone)+"/jobs", wire.SubmitRequest{Command: "echo waited"})
			done <- result{r, err}
		}()
		c.Restart(t, stopped) // a quorum again: an election follows
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.r.Status != http.StatusCreated {
			t.Fatalf("submit sent while no leader was known: want 201 after the election, got %s", res.r)
		}
		job := decode[wire.Job](t, res.r)
		if got := getJob(t, c.URL(stopped), job.ID); got.Command != "echo waited" {
			t.Errorf("job %s after the election = %+v", job.ID, got)
		}
	})
}

// leaderTap counts the job submits that reach node 0 through its advertised
// address, which the other nodes forward to.
type leaderTap struct {
	once    sync.Once
	srv     *httptest.Server
	tr      *http.Transport
	submits atomic.Int64
}

func (p *leaderTap) wrap(t *testing.T, advertise string) string {
	p.once.Do(func() {
		target, err := url.Parse(advertise)
		if err != nil {
			t.Fatal(err)
		}
		p.tr = &http.Transport{}
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.Transport = p.tr
		p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/jobs" {
				p.submits.Add(1)
			}
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(func() {
			p.srv.Close()
			p.tr.CloseIdleConnections()
		})
	})
	return p.srv.URL
}

// TestFollowerReadsTheBodyBeforeForwarding: a follower forwards a request
// only once it has its whole body, so a client that sends slowly holds no
// connection to the leader, and a body over the limit never reaches it.
func TestFollowerReadsTheBodyBeforeForwarding(t *testing.T) {
	tap := &leaderTap{}
	c := newCluster(t, 3, clustertest.WithConfig(func(i int, nc *node.Config) {
		nc.API.MaxBodyBytes = 4096
		if i == 0 {
			nc.API.AdvertiseHTTP = tap.wrap(t, nc.API.AdvertiseHTTP)
		}
	}))
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if !c.Node(0).Raft().IsLeader() {
			return errors.New("n1 does not lead")
		}
		for i := 1; i < c.Len(); i++ {
			if id, _ := c.Node(i).Raft().Leader(); id != "n1" {
				return fmt.Errorf("n%d follows %q", i+1, id)
			}
		}
		return nil
	})
	follower := c.URL(1)

	t.Run("ASlowBodyReachesTheLeaderOnlyWhenComplete", func(t *testing.T) {
		before := tap.submits.Load()
		body := `{"command":"echo slow","queue":"slow"}`
		pr, pw := io.Pipe()
		defer pw.Close() // ends the request if the test stops early
		type result struct {
			resp *http.Response
			err  error
		}
		done := make(chan result, 1)
		go func() {
			req, err := http.NewRequest(http.MethodPost, follower+"/jobs", pr)
			if err != nil {
				done <- result{nil, err}
				return
			}
			resp, err := httpClient.Do(req)
			done <- result{resp, err}
		}()
		if _, err := io.WriteString(pw, body[:10]); err != nil {
			t.Fatal(err)
		}
		// The follower has the headers and part of the body: for a second,
		// nothing may reach the leader.
		for range 20 {
			if n := tap.submits.Load() - before; n != 0 {
				t.Fatalf("the leader got %d submits while the client was still sending the body", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := io.WriteString(pw, body[10:]); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		data, _ := io.ReadAll(res.resp.Body)
		res.resp.Body.Close()
		if res.resp.StatusCode != http.StatusCreated {
			t.Fatalf("slow submit: HTTP %d %s", res.resp.StatusCode, data)
		}
		if n := tap.submits.Load() - before; n != 1 {
			t.Errorf("the leader got %d submits once the body was complete, want 1", n)
		}
	})

	t.Run("ABodyOverTheLimitIsRefusedByTheFollower", func(t *testing.T) {
		before := tap.submits.Load()
		big := `{"command":"echo big","metadata":{"k":"` + strings.Repeat("x", 5000) + `"}}`
		r := send(t, http.MethodPost, follower+"/jobs", big)
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("a body over --max-body-bytes: want 413, got %s", r)
		}
		if n := tap.submits.Load() - before; n != 0 {
			t.Errorf("the leader got %d submits of a body over the limit", n)
		}
	})
}
