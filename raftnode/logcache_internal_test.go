package raftnode

import (
	"errors"
	"testing"
	"time"

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

	t.Run("ServesEntriesWhileTheyAreWritten", func(t *testing.T) {
		under := &heldStore{LogStore: raft.NewInmemStore(), hold: make(chan struct{}), entered: make(chan struct{})}
		logs, err := newLogCache(under)
		if err != nil {
			t.Fatal(err)
		}
		stored := make(chan error, 1)
		go func() {
			stored <- logs.StoreLogs([]*raft.Log{
				{Index: 1, Term: 2, Type: raft.LogCommand, Data: []byte("one")},
				{Index: 2, Term: 2, Type: raft.LogCommand, Data: []byte("two")},
			})
		}()
		<-under.entered // the write is under way, and held
		// The leader's replicators read what it is writing (see
		// dispatchLogs in third_party/raft).
		for idx, want := range map[uint64]string{1: "one", 2: "two"} {
			var got raft.Log
			if err := logs.GetLog(idx, &got); err != nil {
				t.Fatalf("GetLog(%d) during the write: %v", idx, err)
			}
			if string(got.Data) != want || got.Index != idx || got.Term != 2 {
				t.Errorf("GetLog(%d) during the write = index %d term %d data %q; want %q", idx, got.Index, got.Term, got.Data, want)
			}
		}
		var none raft.Log
		if err := logs.GetLog(3, &none); err == nil {
			t.Errorf("GetLog(3) found an entry never written: %+v", none)
		}
		close(under.hold)
		select {
		case err := <-stored:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("StoreLogs did not return once released")
		}
		var got raft.Log
		if err := logs.GetLog(2, &got); err != nil || string(got.Data) != "two" {
			t.Errorf("GetLog(2) after the write = %q, %v; want \"two\"", got.Data, err)
		}
	})
	t.Run("ServesNothingOfAFailedWrite", func(t *testing.T) {
		under := &heldStore{LogStore: raft.NewInmemStore(), fail: true}
		logs, err := newLogCache(under)
		if err != nil {
			t.Fatal(err)
		}
		entries := []*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand}}
		logs.StageLogs(entries)
		if err := logs.StoreLogs(entries); err == nil {
			t.Fatal("StoreLogs did not pass the store's error on")
		}
		var got raft.Log
		if err := logs.GetLog(1, &got); err == nil {
			t.Errorf("GetLog(1) found the entry of a failed write: %+v", got)
		}
	})
	// The leader stages its entries before it wakes its replicators, which
	// may ask for them before StoreLogs has begun (dispatchLogs in
	// third_party/raft): they are served from StageLogs on, and StoreLogs
	// writes the staged copies.
	t.Run("ServesStagedEntriesBeforeTheWriteBegins", func(t *testing.T) {
		under := &heldStore{LogStore: raft.NewInmemStore()}
		logs, err := newLogCache(under)
		if err != nil {
			t.Fatal(err)
		}
		entries := []*raft.Log{{Index: 1, Term: 3, Type: raft.LogCommand, Data: []byte("one")}}
		logs.StageLogs(entries)
		var got raft.Log
		if err := logs.GetLog(1, &got); err != nil || string(got.Data) != "one" || got.Term != 3 {
			t.Fatalf("GetLog(1) after StageLogs = %+v, %v; want entry one of term 3", got, err)
		}
		staged := logs.pending[0]
		if staged == entries[0] {
			t.Fatal("StageLogs kept Raft's own pointer, not a copy")
		}
		if err := logs.StoreLogs(entries); err != nil {
			t.Fatal(err)
		}
		if len(under.stored) != 1 || under.stored[0] != staged {
			t.Errorf("StoreLogs wrote %v, not the staged copy %p", under.stored, staged)
		}
		if logs.pending != nil {
			t.Errorf("entries still pending after StoreLogs returned: %v", logs.pending)
		}
	})
}

// heldStore is a log store whose writes, when hold is set, wait for it to
// close after closing entered, and fail when fail is set.
type heldStore struct {
	raft.LogStore
	hold, entered chan struct{}
	fail          bool
	stored        []*raft.Log // what StoreLogs was given, in order
}

func (h *heldStore) StoreLogs(logs []*raft.Log) error {
	if h.fail {
		return errors.New("disk full")
	}
	if h.hold != nil {
		close(h.entered)
		<-h.hold
	}
	h.stored = append(h.stored, logs...)
	return h.LogStore.StoreLogs(logs)
}
