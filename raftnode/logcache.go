package raftnode

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// logCacheSize is how many recent entries raft.LogCache keeps in memory, so
// that replicating them to a follower a little behind, or applying them on
// a follower, reads no disk. A follower more entries behind reads them from
// raft.db. An entry packs up to MaxBatch commands, so its size varies: with
// 1024 entries the cache held 45-53 MB on every node while bench large_store
// filled 300,000 jobs (2,300 entries, 57 a second), the largest item of the
// live heap after the leader's results (see detachedLogs); with 256, 11-16
// MB, and each node's anonymous memory peaked 50-75 MiB lower.
const logCacheSize = 256

// newLogCache puts raft.LogCache in front of logs, behind detachedLogs.
func newLogCache(logs raft.LogStore) (*detachedLogs, error) {
	cache, err := raft.NewLogCache(logCacheSize, logs)
	if err != nil {
		return nil, fmt.Errorf("raft log cache: %w", err)
	}
	return &detachedLogs{LogStore: cache}, nil
}

// detachedLogs hands the store below it copies of the entries Raft stores,
// never Raft's own pointers.
//
// On the leader, Raft stores each new entry through a pointer into its apply
// future (&future.log), and raft.LogCache keeps the pointers it is given. A
// cached entry then keeps its whole future alive, and with it the future's
// response: the FSM's results of every command in the entry, whole jobs
// included, for the last logCacheSize entries. Followers, whose entries come
// off the network, hold only the encoded bytes. Filling a store with
// 300,000 jobs (workron bench --scenarios large_store), the leader's heap
// profile showed over 300 MB of such results live (the store.Job values of
// fsm's newJob and store's Tx.Job), its heap in use reached 880 MiB against
// the followers' 200 MiB, and its anonymous memory peaked at 966 MiB; with
// the copies, 240 MiB like the followers'. A copy is one small struct per
// entry; its Data is shared.
type detachedLogs struct {
	raft.LogStore
}

func (d *detachedLogs) StoreLog(l *raft.Log) error {
	return d.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores copies of logs.
func (d *detachedLogs) StoreLogs(logs []*raft.Log) error {
	return d.LogStore.StoreLogs(detach(logs))
}

// detach copies each entry into an allocation of its own: copies sharing
// one array would keep every entry of the call, Data included, alive until
// the last of them left the cache.
func detach(logs []*raft.Log) []*raft.Log {
	copies := make([]*raft.Log, len(logs))
	for i, l := range logs {
		c := *l
		copies[i] = &c
	}
	return copies
}
