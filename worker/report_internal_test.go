package worker

import (
	"cmp"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// A finished attempt keeps its lease in heartbeats until its report is
// answered, and a report retried past one lease TTL is abandoned.
func TestReportQueueHoldsLeases(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	w := &Worker{running: map[string]*task{}, reports: newReportQueue()}
	w.running["run"] = &task{job: wire.Job{ID: "run", Lease: 7}}
	w.queueReport(log, wire.Job{ID: "fin", Lease: 3}, outcome{})
	w.queueReport(log, wire.Job{ID: "old", Lease: 4}, outcome{})

	want := []wire.JobLease{{JobID: "fin", Lease: 3}, {JobID: "old", Lease: 4}, {JobID: "run", Lease: 7}}
	if got := sortedLeases(w.runningLeases()); !slices.Equal(got, want) {
		t.Fatalf("leases while reports wait = %v, want %v", got, want)
	}

	batch := w.reports.take(10)
	if len(batch) != 2 || len(w.reports.take(10)) != 0 {
		t.Fatalf("take gave %d reports, then more", len(batch))
	}
	if got := sortedLeases(w.runningLeases()); !slices.Equal(got, want) {
		t.Fatalf("leases while reports travel = %v, want %v", got, want)
	}

	batch[1].queued = time.Now().Add(-time.Minute) // older than a lease TTL
	w.reports.putBack(batch, 15*time.Second)
	again := w.reports.take(10)
	if len(again) != 1 || again[0].job.ID != "fin" {
		t.Fatalf("after putBack: %d reports queued, want fin alone", len(again))
	}
	w.settleReports(again, []wire.BatchReportResult{{JobID: "fin", Status: "done"}})
	if got := w.runningLeases(); !slices.Equal(got, []wire.JobLease{{JobID: "run", Lease: 7}}) {
		t.Fatalf("leases after the answer = %v, want run alone", got)
	}
	if w.busy() != true {
		t.Fatal("busy() = false while a job runs")
	}
	delete(w.running, "run")
	if w.busy() {
		t.Fatal("busy() = true with nothing running or waiting")
	}
}

func sortedLeases(ls []wire.JobLease) []wire.JobLease {
	slices.SortFunc(ls, func(a, b wire.JobLease) int { return cmp.Compare(a.Lease, b.Lease) })
	return ls
}

// A report the server did not record for a passing reason (its result's code
// is no_leader, outcome_unknown or internal, or an older server's
// "unavailable") is queued again; one whose lease moved on, or that was
// refused, is settled.
func TestSettleReportsRetriesPassingRefusals(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	codes := []string{
		wire.CodeNoLeader, wire.CodeOutcomeUnknown, wire.CodeInternal, "unavailable",
		wire.CodeStaleLease, wire.CodeNotFound, wire.CodeNotRunning, wire.CodeConflict, wire.CodeForbidden, "",
	}
	retried := map[string]bool{wire.CodeNoLeader: true, wire.CodeOutcomeUnknown: true, wire.CodeInternal: true, "unavailable": true}
	w := &Worker{log: log, running: map[string]*task{}, reports: newReportQueue()}
	results := make([]wire.BatchReportResult, len(codes))
	for i, c := range codes {
		id := "job-" + c
		w.queueReport(log, wire.Job{ID: id, Lease: uint64(i + 1)}, outcome{})
		results[i] = wire.BatchReportResult{JobID: id, Code: c, Error: c}
	}
	w.settleReports(w.reports.take(len(codes)), results)
	var again []string
	for _, p := range w.reports.take(len(codes)) {
		again = append(again, p.job.ID)
	}
	var want []string
	for _, c := range codes {
		if retried[c] {
			want = append(want, "job-"+c)
		}
	}
	if !slices.Equal(again, want) {
		t.Fatalf("queued again = %v, want %v", again, want)
	}
}
