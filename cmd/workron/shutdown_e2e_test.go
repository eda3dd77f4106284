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
	"github.com/workron/workron/internal/testkit/poll"
)

// signalProc sends sig to the process, which must run.
func signalProc(t *testing.T, p *proc, sig syscall.Signal) {
	t.Helper()
	if !p.Signal(sig) {
		t.Fatalf("%s: signal %v: not running", p.Name, sig)
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
		for _, n := range c.Nodes {
			if n != l && n.Running() {
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
		if poll.True(ctx, 0, 50*time.Millisecond, func() bool {
			s, _, err := tryPost(hc, f.URL+"/jobs", `{"command":"echo warm-up","idempotency_key":"warm-up"}`)
			return err == nil && s/100 == 2
		}) != nil {
			t.Fatalf("no submit through %s succeeded", f.Name)
		}
		// The leader, stopped, accepts the forwarded connection but does not
		// answer: the submit is in flight on the follower when it gets
		// SIGTERM. The stop is kept well under the leader's 500ms lease.
		signalProc(t, &l.Proc, syscall.SIGSTOP)
		resumed := false
		defer func() {
			if !resumed {
				signalProc(t, &l.Proc, syscall.SIGCONT)
			}
		}()
		done := make(chan postResult, 1)
		go func() {
			s, b, err := tryPost(hc, f.URL+"/jobs", `{"command":"echo stopping","idempotency_key":"stop-submit"}`)
			done <- postResult{s, b, err}
		}()
		time.Sleep(100 * time.Millisecond) // the follower forwards meanwhile: nothing to poll for
		signalProc(t, &f.Proc, syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond) // the follower is stopping
		signalProc(t, &l.Proc, syscall.SIGCONT)
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
		case <-f.Exited():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not stop within 20s of SIGTERM", f.Name)
		}
		var got wire.Job
		if s, b, err := c.Get(context.Background(), l.URL+"/jobs/"+job.ID, &got); err != nil || s != http.StatusOK || got.ID != job.ID {
			t.Fatalf("GET /jobs/%s on the leader: HTTP %d %s %v", job.ID, s, bytes.TrimSpace(b), err)
		}
		c.restart(t, f)
	})

	t.Run("AForwardedLongPollIsCutWith504", func(t *testing.T) {
		l := c.leader(t)
		f := follower(l)
		done := make(chan postResult, 1)
		go func() {
			s, b, err := tryPost(hc, f.URL+"/jobs/claim", `{"worker_id":"w-stop","queues":["nothing-here"],"wait":"20s"}`)
			done <- postResult{s, b, err}
		}()
		time.Sleep(500 * time.Millisecond) // the claim is parked on the leader meanwhile
		signalProc(t, &f.Proc, syscall.SIGTERM)
		res := <-done
		if res.err != nil {
			t.Fatalf("claim through the stopping follower: %v", res.err)
		}
		var e wire.Error
		if res.status != http.StatusGatewayTimeout || json.Unmarshal(res.body, &e) != nil || e.Code != "outcome_unknown" {
			t.Fatalf("claim through the stopping follower: HTTP %d %q, want 504 outcome_unknown", res.status, res.body)
		}
		<-f.Exited()
		c.restart(t, f)
	})
}
