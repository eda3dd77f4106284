//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

const week = 7 * 24 * time.Hour

func deleteKept(keepFailed time.Duration, ids ...string) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: ids, KeepFailed: int64(keepFailed)}}
}

// TestRetentionKeepFailed checks the floor a delete_kept carries: done jobs
// go at their own retention, failed and cancelled ones no sooner than
// KeepFailed after they finished.
func TestRetentionKeepFailed(t *testing.T) {
	t.Run("FailedJobIsKeptUntilTheFloorThenDeleted", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1, Retention: int64(24 * time.Hour)})[0]
		c := h.claimOne("w1")
		h.at(time.Minute).ok(fail(c.ID, c.Lease, "boom"))
		doneAt := t0.Add(time.Minute)
		if r := h.at(25 * time.Hour).ok(deleteKept(week, j.ID)); r.Deleted != 0 || r.Kept != 1 {
			t.Fatalf("deleted %d and kept %d failed jobs inside the floor, want 0 and 1", r.Deleted, r.Kept)
		}
		if got, want := h.job(j.ID).ExpireAt, doneAt.Add(week).UnixNano(); got != want {
			t.Fatalf("expire_at %d, want DoneAt+7d %d", got, want)
		}
		if ids := h.f.ExpiredJobs(t0.Add(26*time.Hour).UnixNano(), 10); len(ids) != 0 {
			t.Fatalf("kept job listed as expired again: %v", ids)
		}
		if r := h.at(time.Minute + week).ok(deleteKept(week, j.ID)); r.Deleted != 1 {
			t.Fatalf("deleted %d at the end of the floor, want 1", r.Deleted)
		}
	})

	t.Run("DoneJobGoesAtItsOwnRetention", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1, Retention: int64(24 * time.Hour)})[0]
		c := h.claimOne("w1")
		h.ok(succeed(c.ID, c.Lease))
		if r := h.at(24 * time.Hour).ok(deleteKept(week, j.ID)); r.Deleted != 1 {
			t.Fatalf("deleted %d done jobs, want 1", r.Deleted)
		}
	})

	t.Run("CancelledJobIsKeptToo", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "x", Retention: int64(time.Hour)})[0]
		h.ok(cancel(j.ID, false))
		h.status(store.StatusCancelled, j.ID)
		h.at(2 * time.Hour).ok(deleteKept(week, j.ID))
		h.status(store.StatusCancelled, j.ID)
		if got, want := h.job(j.ID).ExpireAt, t0.Add(week).UnixNano(); got != want {
			t.Fatalf("expire_at %d, want %d", got, want)
		}
	})

	t.Run("ALongerRetentionOfItsOwnWins", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1, Retention: int64(30 * 24 * time.Hour)})[0]
		c := h.claimOne("w1")
		h.ok(fail(c.ID, c.Lease, "boom"))
		if r := h.at(week + time.Hour).ok(deleteKept(week, j.ID)); r.Deleted != 0 {
			t.Fatalf("deleted a job before its own 30d retention")
		}
		if got, want := h.job(j.ID).ExpireAt, t0.Add(30*24*time.Hour).UnixNano(); got != want {
			t.Fatalf("expire_at moved to %d, want its own %d", got, want)
		}
	})

	t.Run("ReplicasAgreeAndASnapshotKeepsTheMove", func(t *testing.T) {
		a, b := setup(t), setup(t)
		for _, h := range []*harness{a, b} {
			j := h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1, Retention: int64(time.Hour)})[0]
			c := h.claimOne("w1")
			h.ok(fail(c.ID, c.Lease, "boom"))
			h.at(2 * time.Hour).ok(deleteKept(week, j.ID))
		}
		if da, db := digest(t, a.f), digest(t, b.f); da != db {
			t.Fatalf("replicas differ: %s vs %s", da, db)
		}
		r := snapshotRestore(t, a.f)
		if got, want := digest(t, r), digest(t, a.f); got != want {
			t.Fatalf("restored %s, want %s", got, want)
		}
	})
}

// TestDeleteKeptEncoding checks that a delete with KeepFailed is written
// under its own op name (so that an older node stops at it) and that a
// plain delete carrying the field is refused.
func TestDeleteKeptEncoding(t *testing.T) {
	c := deleteKept(week, "job-1")
	if got := c.Protocol(); got != fsm.ProtocolKeepFailed {
		t.Fatalf("Protocol() = %d, want %d", got, fsm.ProtocolKeepFailed)
	}
	data, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{c}})
	if err != nil {
		t.Fatal(err)
	}
	e := mustDecode(t, data)
	if got := e.Cmds[0]; got.Op != fsm.OpDelete || got.Delete.KeepFailed != int64(week) {
		t.Fatalf("decoded %+v", got)
	}
	if !bytes.Contains(data, []byte(`"delete_kept"`)) {
		t.Fatalf("written as %q, want op name delete_kept", data)
	}
	plain := []byte("\x02\x02\x01\x00" + withLen(`{"op":"delete","delete":{"ids":["job-1"],"keep_failed":5}}`))
	if _, err := fsm.Decode(plain); err == nil {
		t.Fatal("a plain delete with keep_failed was accepted")
	}
	bare := []byte("\x02\x02\x01\x00" + withLen(`{"op":"delete_kept","delete":{"ids":["job-1"]}}`))
	if _, err := fsm.Decode(bare); err == nil {
		t.Fatal("a delete_kept without keep_failed was accepted")
	}
}
