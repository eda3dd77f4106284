//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// signal sends sig to the process, if it runs.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		t.Fatalf("%s: not started", p.name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// tryPost sends body to url and returns the status and the reply body.
func tryPost(hc *http.Client, url, body string) (int, []byte, error) {
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

type postResult struct {
	status int
	body   []byte
	err    error
}

// TestStoppingNodeAnswersForwardedRequests: SIGTERM to a follower while it
// forwards requests to the leader. A submit in flight finishes (201 with the
// job) before the node stops; a forwarded long-poll is cut with 504
// outcome_unknown. Neither gets the empty 200 a stopping node used to send.
func TestStoppingNodeAnswersForwardedRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts three processes")
	}
	bin := workronBinary(t)
	// Slow Raft timeouts, so that the leader stopped for a moment below most
	// likely leads on; should it step down all the same, the follower waits
	// (--leader-wait) for the next one.
	c := startCluster(t, bin, t.TempDir(), "--raft-heartbeat-timeout", "3s", "--raft-election-timeout", "3s",
		"--leader-wait", "15s")
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	follower := func(l *node) *node {
		for _, n := range c.nodes {
			if n != l && n.running() {
				return n
			}
		}
		t.Fatal("no follower runs")
		return nil
	}

	t.Run("ASubmitInFlightFinishesBeforeTheNodeStops", func(t *testing.T) {
		l := c.leader(t)
		f := follower(l)
		// First the follower must know where the leader is: a submit
		// through it succeeds.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if !poll(ctx, 50*time.Millisecond, func() bool {
			s, _, err := tryPost(hc, f.url+"/jobs", `{"command":"echo warm-up","idempotency_key":"warm-up"}`)
			return err == nil && s/100 == 2
		}) {
			t.Fatalf("no submit through %s succeeded", f.name)
		}
		// The leader, stopped, accepts the forwarded connection but does not
		// answer: the submit is in flight on the follower when it gets
		// SIGTERM. The stop is kept well under the leader's 500ms lease.
		l.signal(t, syscall.SIGSTOP)
		resumed := false
		defer func() {
			if !resumed {
				l.signal(t, syscall.SIGCONT)
			}
		}()
		done := make(chan postResult, 1)
		go func() {
			s, b, err := tryPost(hc, f.url+"/jobs", `{"command":"echo stopping","idempotency_key":"stop-submit"}`)
			done <- postResult{s, b, err}
		}()
		time.Sleep(100 * time.Millisecond) // the follower forwards meanwhile: nothing to poll for
		f.signal(t, syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond) // the follower is stopping
		l.signal(t, syscall.SIGCONT)
		resumed = true

		res := <-done
		if res.err != nil {
			t.Fatalf("submit through the stopping follower: %v", res.err)
		}
		var job wire.Job
		if res.status != http.StatusCreated || json.Unmarshal(res.body, &job) != nil || job.ID == "" {
			t.Fatalf("submit through the stopping follower: HTTP %d %q, want 201 with the job", res.status, res.body)
		}
		select {
		case <-f.exited():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not stop within 20s of SIGTERM", f.name)
		}
		var got wire.Job
		if s, b, err := c.get(context.Background(), l.url+"/jobs/"+job.ID, &got); err != nil || s != http.StatusOK || got.ID != job.ID {
			t.Fatalf("GET /jobs/%s on the leader: HTTP %d %s %v", job.ID, s, bytes.TrimSpace(b), err)
		}
		c.restart(t, f)
	})

	t.Run("AForwardedLongPollIsCutWith504", func(t *testing.T) {
		l := c.leader(t)
		f := follower(l)
		done := make(chan postResult, 1)
		go func() {
			s, b, err := tryPost(hc, f.url+"/jobs/claim", `{"worker_id":"w-stop","queues":["nothing-here"],"wait":"20s"}`)
			done <- postResult{s, b, err}
		}()
		time.Sleep(500 * time.Millisecond) // the claim is parked on the leader meanwhile
		f.signal(t, syscall.SIGTERM)
		res := <-done
		if res.err != nil {
			t.Fatalf("claim through the stopping follower: %v", res.err)
		}
		var e wire.Error
		if res.status != http.StatusGatewayTimeout || json.Unmarshal(res.body, &e) != nil || e.Code != "outcome_unknown" {
			t.Fatalf("claim through the stopping follower: HTTP %d %q, want 504 outcome_unknown", res.status, res.body)
		}
		<-f.exited()
		c.restart(t, f)
	})
}
