package raftnode

import (
	"time"

	"github.com/hashicorp/raft"
)

// slowLogStore is the FsyncDelay test hook: it sleeps before every write to
// the Raft log, as a slow disk would, and leaves reads alone.
type slowLogStore struct {
	raft.LogStore
	delay time.Duration
}

func (s *slowLogStore) StoreLog(l *raft.Log) error {
	time.Sleep(s.delay)
	return s.LogStore.StoreLog(l)
}

func (s *slowLogStore) StoreLogs(logs []*raft.Log) error {
	time.Sleep(s.delay)
	return s.LogStore.StoreLogs(logs)
}
