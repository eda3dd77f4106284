package leader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestAdmissionReadsNoWorkerRecords: a pass of admission decodes no worker
// record, however many workers there are (it reads the FSM's in-memory
// copy), and still places a waiting gang on active workers and declares a
// silent busy worker offline.
func TestAdmissionReadsNoWorkerRecords(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	cfg := DefaultAdmissionConfig()
	cfg.WorkerOfflineAfter, cfg.ReserveTimeout = time.Minute, time.Hour
	cfg.Proposer, cfg.State, cfg.Liveness, cfg.Now = e, e.f, silentAfter(time.Minute), e.clock.Now
	a, err := NewAdmission(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		e.propose(fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: fmt.Sprintf("w%03d", i)}}})
	}
	before := e.f.WorkerRecordsRead()
	a.runOnce(context.Background()) // idle: nothing to do
	e.propose(fsm.Cmd{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: 2, Job: fsm.NewJob{Command: "x", MaxAttempts: 1}}})
	if got := a.runOnce(context.Background()); got != 1 {
		t.Fatalf("a pass with a waiting gang and %d active workers proposed %d commands, want 1 reservation", n, got)
	}
	if read := e.f.WorkerRecordsRead() - before; read != 0 {
		t.Errorf("admission decoded %d worker records in two passes, want 0", read)
	}
	// The gang's two workers fall silent: both are declared offline.
	var held []string
	for _, g := range e.f.OpenGangs() {
		held = append(held, g.Workers...)
	}
	if len(held) != 2 {
		t.Fatalf("gang reserved on %v, want 2 workers", held)
	}
	e.clock.Add(2 * time.Minute)
	for i := range n {
		if id := fmt.Sprintf("w%03d", i); id != held[0] && id != held[1] {
			e.propose(fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: id}}})
		}
	}
	before = e.f.WorkerRecordsRead()
	if got := a.runOnce(context.Background()); got != 2 {
		t.Errorf("a pass with 2 silent reserved workers proposed %d commands, want 2 (offline)", got)
	}
	if read := e.f.WorkerRecordsRead() - before; read != 0 {
		t.Errorf("admission decoded %d worker records, want 0", read)
	}
}
