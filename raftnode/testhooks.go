package raftnode

import (
	"time"

	"github.com/hashicorp/raft"
)

// slowLogStore holds the test hook FsyncDelay: before every write to the
// Raft log it sleeps, as a slow disk would; it leaves reads alone.
type slowLogStore struct {
	raft.LogStore
	delay time.Duration
}

func (s *slowLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

func (s *slowLogStore) StoreLogs(logs []*raft.Log) error {
	time.Sleep(s.delay)
	return s.LogStore.StoreLogs(logs)
}

// heldLogStore holds the test hook BeforeLogWrite: it sits in front of
// every other log store, so before is called as a write to the Raft log
// starts, before any store has seen it.
type heldLogStore struct {
	raft.LogStore
	before func()
}

func (h *heldLogStore) StoreLog(l *raft.Log) error {
	return h.StoreLogs([]*raft.Log{l})
}

func (h *heldLogStore) StoreLogs(logs []*raft.Log) error {
	h.before()
	return h.LogStore.StoreLogs(logs)
}
