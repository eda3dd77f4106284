package raftnode

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestLogCache(t *testing.T) {
	t.Run("KeepsCopiesNotThePointersRaftGives", func(t *testing.T) {
		logs, err := newLogCache(raft.NewInmemStore())
		if err != nil {
			t.Fatal(err)
		}
		one := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("one")}
		two := &raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("two")}
		if err := logs.StoreLog(one); err != nil {
			t.Fatal(err)
		}
		if err := logs.StoreLogs([]*raft.Log{two}); err != nil {
			t.Fatal(err)
		}
		// The leader's apply future owns the struct it passed; what the cache
		// and the store hold must not be it.
		one.Data, two.Data = []byte("changed"), []byte("changed")
		for idx, want := range map[uint64]string{1: "one", 2: "two"} {
			var got raft.Log
			if err := logs.GetLog(idx, &got); err != nil {
				t.Fatal(err)
			}
			if string(got.Data) != want || got.Index != idx {
				t.Errorf("GetLog(%d) = index %d, data %q; want %q", idx, got.Index, got.Data, want)
			}
		}
	})
}
