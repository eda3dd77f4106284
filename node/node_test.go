package node_test

import (
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T) node.Config {
	t.Helper()
	c := node.DefaultConfig()
	c.HTTPAddr = "127.0.0.1:0"
	c.Raft.ID, c.Raft.RaftAddr, c.Raft.DataDir = "n1", "127.0.0.1:0", filepath.Join(t.TempDir(), "n1")
	c.Raft.Bootstrap = true
	c.Raft.HeartbeatTimeout, c.Raft.ElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
	return c
}

// TestNode starts a one-node cluster the way every caller does and stops it.
func TestNode(t *testing.T) {
	t.Run("LeadsServesAndRecordsItsAddressThenShutsDownOnce", func(t *testing.T) {
		n, err := node.Start(testConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		if n.URL() != "http://"+n.Addr() {
			t.Fatalf("advertised %s, listening on %s", n.URL(), n.Addr())
		}
		// Leadership's Establish (through Raft's OnLeader) records the
		// node's address in the state.
		clustertest.WaitFor(t, 10*time.Second, func() error {
			nodes, err := n.Raft().FSM().Nodes()
			if err != nil {
				return err
			}
			for _, m := range nodes {
				if m.ID == "n1" && m.HTTP == n.URL() {
					return nil
				}
			}
			return errors.New("n1's address is not in the state yet")
		})
		resp, err := http.Get(n.URL() + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /health: %d", resp.StatusCode)
		}
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := n.Shutdown(); err != nil {
			t.Fatalf("second Shutdown: %v", err)
		}
		if _, err := http.Get(n.URL() + "/health"); err == nil {
			t.Fatal("the API still answers after Shutdown")
		}
	})

	t.Run("AFailedStartLeavesNothingRunning", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c := testConfig(t)
		c.Listener = ln
		c.API.LeaseTTL = time.Millisecond // refused by api.New, after Raft opened
		if _, err := node.Start(c); err == nil {
			t.Fatal("Start accepted a 1ms lease TTL")
		}
		// The listener was closed and Raft shut down (goleak checks the
		// goroutines): the address can be bound again.
		again, err := net.Listen("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("the listener was left open: %v", err)
		}
		again.Close()
	})
}
