package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/testkit/syncbuf"
)

// TestServerLeavesGracefully runs `workron server` three times in this
// process and stops the leader the way SIGTERM does (its context ends): it
// hands leadership to a peer before it stops, so the two left carry on.
func TestServerLeavesGracefully(t *testing.T) {
	dir := t.TempDir()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)

	n1 := startServerCmd(t, "--id", "n1", "--bootstrap", "--data", filepath.Join(dir, "n1"))
	n2 := startServerCmd(t, "--id", "n2", "--join", n1.url, "--data", filepath.Join(dir, "n2"))
	n3 := startServerCmd(t, "--id", "n3", "--join", n1.url, "--data", filepath.Join(dir, "n3"))
	clustertest.WaitFor(t, 15*time.Second, func() error {
		var cl wire.Cluster
		if err := getJSON(hc, n1.url+"/cluster", &cl); err != nil {
			return err
		}
		if cl.Leader != "n1" || len(cl.Nodes) != 3 {
			return fmt.Errorf("cluster %+v", cl)
		}
		for _, n := range cl.Nodes {
			if n.Health == nil || n.Health.Status != "ok" {
				return fmt.Errorf("node %s health %+v", n.ID, n.Health)
			}
		}
		return nil
	})

	if err := n1.stop(); err != nil {
		t.Fatalf("n1 stopped with %v\n%s", err, n1.logs)
	}
	if lines := n1.logs.find(t, "msg", "handed leadership over before shutting down"); len(lines) != 1 {
		t.Fatalf("n1 did not log handing leadership over:\n%s", n1.logs)
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		var h2, h3 wire.Health
		if err := getJSON(hc, n2.url+"/health", &h2); err != nil {
			return err
		}
		if err := getJSON(hc, n3.url+"/health", &h3); err != nil {
			return err
		}
		if h2.Leader == "" || h2.Leader == "n1" || h2.Leader != h3.Leader {
			return fmt.Errorf("n2 follows %q, n3 follows %q", h2.Leader, h3.Leader)
		}
		return nil
	})
	body, _ := json.Marshal(wire.SubmitRequest{Command: "true"})
	resp, err := hc.Post(n3.url+"/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit after the leader left: HTTP %d", resp.StatusCode)
	}
}

// serverCmd is `workron server` running in this process.
type serverCmd struct {
	url  string
	logs *logBuffer
	stop func() error // ends it like SIGTERM and returns run's error; safe to call twice
}

// startServerCmd runs `workron server` with args plus loopback addresses on
// free ports, short Raft timeouts and JSON logs, and returns once it
// serves. The test's cleanup stops it.
func startServerCmd(t *testing.T, args ...string) *serverCmd {
	t.Helper()
	args = append([]string{"server", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms", "--log-format", "json"}, args...)
	ctx, cancel := context.WithCancel(context.Background())
	s := &serverCmd{logs: &logBuffer{}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, io.Discard, s.logs) }()
	var (
		once sync.Once
		err  error
	)
	s.stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = s.stop() })
	clustertest.WaitFor(t, 10*time.Second, func() error {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("workron %s: %v\n%s", strings.Join(args, " "), err, s.logs)
		default:
		}
		if lines := s.logs.find(t, "msg", "serving"); len(lines) == 1 {
			s.url = fmt.Sprint(lines[0]["http"])
			return nil
		}
		return errors.New("not serving yet")
	})
	return s
}

// logBuffer collects JSON log lines from concurrent writers.
type logBuffer struct{ syncbuf.Buffer }

// find returns the JSON lines whose fields include every key=value pair.
func (b *logBuffer) find(t *testing.T, kv ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue // raft's own lines, say
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && fmt.Sprint(m[kv[i]]) == kv[i+1]
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// getJSON GETs a URL and decodes a 2xx reply.
func getJSON(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: HTTP %d %s", url, resp.StatusCode, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, v)
}
