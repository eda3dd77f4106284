// Package raftnode runs one Workron cluster member: hashicorp/raft with its
// log and stable store in raft.db (logstore.go), file snapshots in Raft's
// layout with a CRC-32C, synced as they are written (snapstore.go), the TCP
// transport, and the state machine of package fsm. It owns bootstrap,
// membership changes, leadership changes and the proposer; it never parses
// HTTP.
//
// # Proposer
//
// Callers propose single commands with Propose. The node's proposer packs
// every command waiting at that moment into one log entry, stamps the
// leader's time on it and hands it to Raft; up to MaxInflight entries are in
// flight at once, but while several callers propose, a small entry goes out
// beside another only once it has waited for one to finish, gathering what
// arrives meanwhile. One fsync'd entry then carries hundreds of commands,
// which is what makes claims and completions cheap. ProposeTogether proposes
// commands that must share one entry, in order (a submit and the claim of a
// worker waiting for it): the proposer never splits them.
//
// # Stages
//
// stages.go follows each entry the node proposes through Raft (queue,
// dispatch, leader_write, replicate, commit_notice, apply, reply) from
// records the log store, the transport and the state machine fill in by
// index, and times every log write and AppendEntries round trip; Stats
// carries the histograms, and package api exports them.
//
// The proposer refuses (ErrNeedsUpgrade) a command whose fsm.Cmd.Protocol is
// higher than the cluster's protocol, the lowest that a member runs, which
// the API measures and records (SetMemberProtocols): in a cluster of two
// versions no member is sent an entry it would stop at. A member whose
// protocol is not known yet (a new cluster's first moments, a node that
// just joined) is not taken for an old one: a command above protocol 1,
// and a caller choosing a command's form (AwaitProtocol), wait for it, for
// at most Config.ProtocolWait.
//
// # Leadership
//
// Leadership changes arrive on raft.Config.NotifyCh. On gaining leadership
// the node waits for a Barrier, so its state machine has applied everything
// committed, and then runs Config.OnLeader under a context that is cancelled
// when leadership is lost. Until that Barrier has completed, VerifyLeader
// waits (or fails with ErrNotLeader): a node that won an election may not yet
// have applied what earlier leaders acknowledged, so its state must not
// answer reads as the leader's.
//
// # Time
//
// The leader stamps its time into every entry; the FSM never lets it go
// back. Node.Now is that time: on gaining leadership the node takes max(own
// clock, last entry's time) and adds its monotonic clock's elapsed time, so
// a node whose wall clock lags or jumped neither freezes the log's time nor
// reads a clock behind it in its leader loops (lease expiry, retries).
//
// # Restarts
//
// The state file records the index it has applied. Raft is told not to
// restore its snapshot at start (the state file is at least as new), and the
// FSM skips entries at or below its index when Raft replays the log tail. A
// state file older than the newest snapshot is restored from it first. The
// state file is checked at every start (store.VerifyPages); a damaged one, or
// one whose records the FSM cannot load, is set aside as state.db.damaged and
// the state rebuilt from the snapshot and the log.
//
// # Restore
//
// Restore, or RestoreFile for a backup already received into the data
// directory (NewRestoreFile), hands a verified backup to Raft's user
// restore: the leader stores it as a snapshot at an index past its log and
// the backup's applied index, leaving that index out of the log, so every
// follower and every later joiner is sent the snapshot. The FSM then holds the backup's applied index,
// below the snapshot's, and applies every later entry. A backup staged by
// StageRestore in a new node's data directory goes the same way once that
// node, bootstrapped alone, first leads.
package raftnode
