package raftnode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkFdatasync is the floor under a log write on this disk: one
// 4 KiB write and one fdatasync of a file.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	for i := 0; b.Loop(); i++ {
		if _, err := f.WriteAt(page, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreLogs times the log store's StoreLogs of n entries of 1 KiB
// (about one packed entry of a few submits), as the leader's dispatchLogs
// and a follower's AppendEntries call it. Compare with BenchmarkFdatasync:
// a bbolt commit writes its pages and fsyncs, then its meta page and
// fsyncs again.
func BenchmarkStoreLogs(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			s, err := openLogStore(filepath.Join(b.TempDir(), "raft.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := make([]byte, 1024)
			next := uint64(1)
			for b.Loop() {
				logs := make([]*raft.Log, n)
				for i := range logs {
					logs[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data}
					next++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
