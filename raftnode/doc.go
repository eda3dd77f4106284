// Package raftnode runs one Workron cluster member: hashicorp/raft with its
// log and stable store in raft-boltdb, file snapshots, the TCP transport, and
// the state machine of package fsm. It owns bootstrap, membership changes,
// leadership changes and the proposer; it never parses HTTP.
//
// # Proposer
//
// Callers propose single commands with Propose. The node's proposer packs
// every command waiting at that moment into one log entry, stamps the
// leader's time on it and hands it to Raft; up to MaxInflight entries are in
// flight at once. One fsync'd entry then carries hundreds of commands, which
// is what makes claims and completions cheap.
//
// # Leadership
//
// Leadership changes arrive on raft.Config.NotifyCh. On gaining leadership
// the node waits for a Barrier, so its state machine has applied everything
// committed, and then runs Config.OnLeader under a context that is cancelled
// when leadership is lost.
//
// # Restarts
//
// The state file records the index it has applied. Raft is told not to
// restore its snapshot at start (the state file is at least as new), and the
// FSM skips entries at or below its index when Raft replays the log tail. A
// state file older than the newest snapshot is restored from it first.
package raftnode
