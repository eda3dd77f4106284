package raftnode

import (
	"time"

	"github.com/hashicorp/raft"
)

// slowLogStore holds the test hooks FsyncDelay and BeforeLogWrite: before
// every write to the Raft log it sleeps, as a slow disk would, and calls
// before; it leaves reads alone.
type slowLogStore struct {
	raft.LogStore
	delay  time.Duration
	before func()
}

func (s *slowLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

func (s *slowLogStore) StoreLogs(logs []*raft.Log) error {
	time.Sleep(s.delay)
	if s.before != nil {
		s.before()
	}
	return s.LogStore.StoreLogs(logs)
}
