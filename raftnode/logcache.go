package raftnode

import (
	"fmt"
	"sync"

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
//
// It also serves the entries of a write under way: the leader's
// replicators send entries while the leader writes them (dispatchLogs in
// third_party/raft, see its WORKRON.md). The leader stages them first
// (StageLogs, raft.LogStager), then wakes its replicators, then stores
// them; a replicator reads them through GetLog before StoreLogs returns,
// when neither raft.LogCache (which caches an entry once written) nor the
// store below has them yet. An entry of a failed write is never served
// afterwards.
type detachedLogs struct {
	raft.LogStore

	mu      sync.RWMutex
	pending []*raft.Log // the entries of the write under way, by index
}

var _ raft.LogStager = (*detachedLogs)(nil)

func (d *detachedLogs) StoreLog(l *raft.Log) error {
	return d.StoreLogs([]*raft.Log{l})
}

// StageLogs serves copies of logs from now until the StoreLogs of the same
// entries returns. Without it, a leader's replicator woken for an entry
// could ask for it before StoreLogs had begun, find it nowhere, and fall
// back to sending the follower a whole snapshot.
func (d *detachedLogs) StageLogs(logs []*raft.Log) {
	copies := detach(logs)
	d.mu.Lock()
	d.pending = copies
	d.mu.Unlock()
}

// StoreLogs stores the staged copies of logs, or copies made now if they
// were not staged (a follower's entries).
func (d *detachedLogs) StoreLogs(logs []*raft.Log) error {
	d.mu.Lock()
	copies := d.pending
	if !sameEntries(copies, logs) {
		copies = detach(logs)
		d.pending = copies
	}
	d.mu.Unlock()
	err := d.LogStore.StoreLogs(copies)
	d.mu.Lock()
	d.pending = nil
	d.mu.Unlock()
	return err
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

// sameEntries says whether copies were made of logs: the same indexes and
// terms.
func sameEntries(copies, logs []*raft.Log) bool {
	if len(copies) != len(logs) || len(logs) == 0 {
		return false
	}
	a, b := copies[0], logs[0]
	y, z := copies[len(copies)-1], logs[len(logs)-1]
	return a.Index == b.Index && a.Term == b.Term && y.Index == z.Index && y.Term == z.Term
}

// GetLog reads the entry at index from the write under way, if it holds
// it, and from the stores below otherwise.
func (d *detachedLogs) GetLog(index uint64, out *raft.Log) error {
	d.mu.RLock()
	if p := d.pending; len(p) > 0 && index >= p[0].Index && index <= p[len(p)-1].Index {
		*out = *p[index-p[0].Index]
		d.mu.RUnlock()
		return nil
	}
	d.mu.RUnlock()
	return d.LogStore.GetLog(index, out)
}
