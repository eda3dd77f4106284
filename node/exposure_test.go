package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// start starts a node, waits until it leads, and stops it when the test
// ends.
func start(t *testing.T, c node.Config) *node.Node {
	t.Helper()
	n, err := node.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if !n.Raft().IsLeader() {
			return fmt.Errorf("n1 does not lead yet")
		}
		return nil
	})
	return n
}

// getAs sends GET /health naming host in the Host header; it returns the
// status and the error code.
func getAs(t *testing.T, n *node.Node, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.URL()+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	tr := &http.Transport{DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e wire.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Code
}

// elsewhere is a listener on loopback that says it listens on another
// host, as a node on a LAN address would: tests listen on 127.0.0.1 only.
type elsewhere struct{ net.Listener }

func (elsewhere) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 9, 8, 7), Port: 7001} }

// TestHostNames: a node on loopback serves only the names that mean it
// (a web page whose domain resolves to 127.0.0.1, DNS rebinding, gets
// 403), plus those of API.AllowedHosts; a node beyond loopback serves any.
func TestHostNames(t *testing.T) {
	t.Run("ALoopbackNodeServesOnlyLoopbackNames", func(t *testing.T) {
		n := start(t, testConfig(t))
		for _, host := range []string{"localhost:7070", n.Addr(), "[::1]:7070"} {
			if st, code := getAs(t, n, host); st != http.StatusOK {
				t.Errorf("Host %s: %d %s", host, st, code)
			}
		}
		if st, code := getAs(t, n, "evil.example:7070"); st != http.StatusForbidden || code != wire.CodeHostNotAllowed {
			t.Fatalf("Host evil.example: %d %s, want 403 %s", st, code, wire.CodeHostNotAllowed)
		}
	})

	t.Run("AllowedHostsAddNames", func(t *testing.T) {
		c := testConfig(t)
		c.API.AllowedHosts = []string{"jobs.example"}
		n := start(t, c)
		if st, code := getAs(t, n, "jobs.example:7070"); st != http.StatusOK {
			t.Errorf("Host jobs.example: %d %s", st, code)
		}
		if st, code := getAs(t, n, "evil.example"); st != http.StatusForbidden || code != wire.CodeHostNotAllowed {
			t.Fatalf("Host evil.example: %d %s, want 403 %s", st, code, wire.CodeHostNotAllowed)
		}
	})

	t.Run("ANodeBeyondLoopbackServesAnyName", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c := testConfig(t)
		c.Listener = elsewhere{ln}
		c.API.AdvertiseHTTP = "http://" + ln.Addr().String()
		n := start(t, c)
		if st, code := getAs(t, n, "jobs.example:7001"); st != http.StatusOK {
			t.Fatalf("Host jobs.example: %d %s", st, code)
		}
	})
}

// TestMaxConnections opens 200 connections that send nothing to a node
// capped at 50 (issue #28: 22,000 of them took a follower's file
// descriptors, and /health waited for --read-header-timeout): the node
// closes the oldest silent ones to make room at once, not when their
// header timeout ends, and /health answers.
func TestMaxConnections(t *testing.T) {
	c := testConfig(t)
	c.MaxConnections = 50
	c.ReadHeaderTimeout = 10 * time.Minute // only the cap closes them
	n := start(t, c)
	var closed atomic.Int64
	for range 200 {
		conn, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		go func() {
			_, _ = io.Copy(io.Discard, conn) // returns when the node closes it
			closed.Add(1)
		}()
	}
	clustertest.WaitFor(t, 20*time.Second, func() error {
		if k := closed.Load(); k < 150 {
			return fmt.Errorf("the node closed %d of 200 silent connections, want 150 (cap 50)", k)
		}
		return nil
	})
	if st, code := getAs(t, n, n.Addr()); st != http.StatusOK {
		t.Fatalf("GET /health beside 50 silent connections: %d %s", st, code)
	}
}
