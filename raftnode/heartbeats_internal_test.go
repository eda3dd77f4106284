package raftnode

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Raft keeps seeing the transport's optional interfaces through the
// wrapper.
var (
	_ raft.WithPreVote = serialHeartbeats{}
	_ raft.WithClose   = serialHeartbeats{}
)

// A heartbeat sent to a node whose transport is wrapped arrives on the
// consumer channel, where Raft's main loop reads it, and never at the
// handler Raft registers.
func TestHeartbeatsGoThroughTheMainLoop(t *testing.T) {
	recv, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		send.CloseStreams() // closes the pooled connection, so the receiver's handler ends
		send.Close()
	}()

	fast := make(chan raft.RPC, 1)
	serialHeartbeats{recv}.SetHeartbeatHandler(func(rpc raft.RPC) { fast <- rpc })

	heartbeat := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2"), Addr: []byte(send.LocalAddr())}, Term: 9}
	done := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		done <- send.AppendEntries("n1", recv.LocalAddr(), heartbeat, &resp)
	}()
	select {
	case rpc := <-recv.Consumer():
		if req, ok := rpc.Command.(*raft.AppendEntriesRequest); !ok || req.Term != 9 {
			t.Fatalf("consumer got %#v, want the heartbeat", rpc.Command)
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 9}, nil)
	case <-fast:
		t.Fatal("the heartbeat took the fast path")
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat never arrived")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
