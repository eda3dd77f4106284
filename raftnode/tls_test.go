package raftnode_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/testkit/testcert"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// mutualTLS is the Raft configuration of a node holding leaf and trusting ca.
func mutualTLS(ca *testcert.CA, leaf *testcert.Leaf) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{leaf.TLS},
		RootCAs:      ca.Pool(),
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}

// openNode starts a node on 127.0.0.1 with 200 ms Raft timeouts (at 50 ms,
// a loaded machine under -race holds elections of its own now and then).
func openNode(t *testing.T, id string, tc *tls.Config, mutate func(*raftnode.Config)) *raftnode.Node {
	t.Helper()
	cfg := raftnode.DefaultConfig()
	cfg.ID, cfg.RaftAddr, cfg.DataDir = id, "127.0.0.1:0", filepath.Join(t.TempDir(), id)
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
	cfg.ApplyTimeout = 5 * time.Second
	cfg.RaftLogLevel = "OFF" // refused handshakes are logged as errors
	cfg.TLS = tc
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() {
		if err := n.Shutdown(); err != nil {
			t.Errorf("shutdown %s: %v", id, err)
		}
	})
	return n
}

func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	poll.Wait(t, timeout, 10*time.Millisecond, cond)
}

// tlsCluster is a two-node cluster whose Raft speaks mutual TLS with ca.
func tlsCluster(t *testing.T, ca *testcert.CA) (leader, follower *raftnode.Node) {
	t.Helper()
	leader = openNode(t, "n1", mutualTLS(ca, ca.Issue(t, "n1")), func(c *raftnode.Config) { c.Bootstrap = true })
	waitFor(t, 10*time.Second, func() error {
		if !leader.IsLeader() {
			return errors.New("n1 does not lead yet")
		}
		return nil
	})
	follower = openNode(t, "n2", mutualTLS(ca, ca.Issue(t, "n2")), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader.AddVoter(ctx, "n2", follower.RaftAddr()); err != nil {
		t.Fatalf("add n2: %v", err)
	}
	return leader, follower
}

func register(t *testing.T, n *raftnode.Node, worker string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Propose(ctx, fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: worker}}}); err != nil {
		t.Fatalf("propose: %v", err)
	}
}

func TestTLSTransport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft clusters")
	}
	ca := testcert.NewCA(t, "cluster CA")

	t.Run("MembersReplicateOverMutualTLS", func(t *testing.T) {
		leader, follower := tlsCluster(t, ca)
		register(t, leader, "w1")
		waitFor(t, 10*time.Second, func() error {
			if a, b := leader.FSM().Applied(), follower.FSM().Applied(); a != b {
				return fmt.Errorf("n1 applied %d, n2 %d", a, b)
			}
			return nil
		})
	})

	// A host that is not a member leads a cluster of its own and makes n1
	// and n2 its followers: it sends them AppendEntries at their term.
	// Without TLS, n1 would step down for it and take its entries; here its
	// connections are refused, so n1 and n2 never follow it, keep their
	// configuration and never apply its entries.
	rogues := map[string]func(t *testing.T) *tls.Config{
		"CertificateFromAnotherCA": func(t *testing.T) *tls.Config {
			other := testcert.NewCA(t, "another CA")
			tc := mutualTLS(other, other.Issue(t, "rogue"))
			tc.RootCAs = ca.Pool() // it even trusts the cluster: its own certificate is what fails
			return tc
		},
		"PlainTCP": func(*testing.T) *tls.Config { return nil },
	}
	for name, rogueTLS := range rogues {
		t.Run("NodeWith"+name+"IsRefused", func(t *testing.T) {
			leader, follower := tlsCluster(t, ca)
			rogue := openNode(t, "rogue", rogueTLS(t), func(c *raftnode.Config) {
				c.Bootstrap = true
				c.HeartbeatTimeout, c.ElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
			})
			waitFor(t, 10*time.Second, func() error {
				if !rogue.IsLeader() {
					return errors.New("the rogue does not lead its own cluster yet")
				}
				return nil
			})
			register(t, rogue, "evil")
			for id, n := range map[string]*raftnode.Node{"n1": leader, "n2": follower} {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				_ = rogue.AddVoter(ctx, id, n.RaftAddr()) // whether its own log takes them does not matter
				cancel()
			}
			// The rogue now sends heartbeats and entries every few ms, and
			// campaigns when they fail: give it many tries, watching that
			// no member ever follows it.
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				for _, n := range []*raftnode.Node{leader, follower} {
					if id, _ := n.Leader(); id == "rogue" {
						t.Fatalf("%s follows the rogue", n.ID())
					}
				}
			}
			register(t, leader, "w2") // the cluster still commits
			for _, n := range []*raftnode.Node{leader, follower} {
				servers, err := n.Servers()
				if err != nil {
					t.Fatal(err)
				}
				if len(servers) != 2 {
					t.Fatalf("%s's configuration changed: %+v", n.ID(), servers)
				}
				if _, err := n.FSM().Worker("evil"); err == nil {
					t.Fatalf("%s applied the rogue's entry", n.ID())
				}
			}
		})
	}

	t.Run("MemberAddedWithAForeignCertificateGetsNothing", func(t *testing.T) {
		leader, _ := tlsCluster(t, ca)
		other := testcert.NewCA(t, "another CA")
		tc := mutualTLS(other, other.Issue(t, "n3"))
		tc.RootCAs = ca.Pool()
		n3 := openNode(t, "n3", tc, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// An operator's mistake: the leader adds it. n1 and n2 still make
		// a quorum of three, but n3 receives no entry.
		if err := leader.AddVoter(ctx, "n3", n3.RaftAddr()); err != nil {
			t.Fatalf("add n3: %v", err)
		}
		register(t, leader, "w3")
		time.Sleep(300 * time.Millisecond) // several heartbeats: a negative needs time to show
		if n3.FSM().Applied() != 0 || n3.Stats().LastLogIndex != 0 {
			t.Fatalf("n3 received entries: applied %d, last log %d", n3.FSM().Applied(), n3.Stats().LastLogIndex)
		}
		if err := leader.RemoveServer(ctx, "n3"); err != nil {
			t.Fatalf("remove n3: %v", err)
		}
	})

	t.Run("HandshakeWithoutClientCertificateFails", func(t *testing.T) {
		leader, _ := tlsCluster(t, ca)
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", leader.RaftAddr(),
			&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca.Pool()})
		if err != nil {
			return // refused during the handshake: fine
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write([]byte{0})
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("the node answered a peer without a client certificate")
		}
	})

	t.Run("ConfigWithoutRequiredClientCertsIsRefused", func(t *testing.T) {
		cfg := raftnode.DefaultConfig()
		cfg.ID, cfg.RaftAddr, cfg.DataDir = "x", "127.0.0.1:0", t.TempDir()
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "x").TLS}}
		if n, err := raftnode.Open(cfg); err == nil {
			n.Shutdown()
			t.Fatal("Open accepted a TLS config that does not verify peers")
		}
	})
}
