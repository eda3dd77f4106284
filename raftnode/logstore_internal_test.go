package raftnode

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestLogStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	edges := func() (uint64, uint64) {
		t.Helper()
		first, err := s.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		last, err := s.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		return first, last
	}
	if first, last := edges(); first != 0 || last != 0 {
		t.Fatalf("empty log: first %d last %d, want 0 0", first, last)
	}
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte{byte(i)}, Extensions: []byte("x"), AppendedAt: at})
	}
	if err := s.StoreLog(logs[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(logs[1:]); err != nil {
		t.Fatal(err)
	}
	if first, last := edges(); first != 1 || last != 10 {
		t.Fatalf("first %d last %d, want 1 10", first, last)
	}
	var got raft.Log
	if err := s.GetLog(7, &got); err != nil {
		t.Fatal(err)
	}
	if got.Index != 7 || got.Term != 2 || got.Type != raft.LogCommand || string(got.Data) != "\x07" || string(got.Extensions) != "x" || !got.AppendedAt.Equal(at) {
		t.Fatalf("GetLog(7) = %+v", got)
	}
	if err := s.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(9, 20); err != nil {
		t.Fatal(err)
	}
	if first, last := edges(); first != 5 || last != 8 {
		t.Fatalf("after deleting 1-4 and 9-20: first %d last %d, want 5 8", first, last)
	}
	for _, i := range []uint64{4, 9} {
		if err := s.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(%d) of a deleted entry: %v, want raft.ErrLogNotFound", i, err)
		}
	}

	// hashicorp/raft tells a key never set by the error's text.
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a key never set: %v, want \"not found\"", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}

	// All of it is on disk.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = openLogStore(path); err != nil {
		t.Fatal(err)
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
		t.Errorf("CurrentTerm after reopening = %d, %v; want 3", term, err)
	}
	if cand, err := s.Get([]byte("LastVoteCand")); err != nil || string(cand) != "n2" {
		t.Errorf("LastVoteCand after reopening = %q, %v; want n2", cand, err)
	}
	if first, last := edges(); first != 5 || last != 8 {
		t.Errorf("after reopening: first %d last %d, want 5 8", first, last)
	}
}
