package fsm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/fsmtest"
)

// BenchmarkSizing measures what a job costs the state file, for the sizing
// rule of docs/operations.md: for each shape it applies sizingJobs jobs
// through real commands (submit, claim, report) and reports the bytes of
// bbolt pages in use per job (B/job, store.Size's InUseBytes, indexes
// included), and per extra byte or entry where the shape adds one. Sizes,
// never times: run it once, with
//
//	go test ./fsm -run '^$' -bench BenchmarkSizing -benchtime 1x
func BenchmarkSizing(b *testing.B) {
	const sizingJobs = 20_000
	meta := map[string]string{}
	for i := range 10 {
		meta[fmt.Sprintf("key-%04d", i)] = fmt.Sprintf("value-%010d", i) // 8 + 16 bytes
	}
	payload := json.RawMessage(`{"to":"someone@example.com","template":"welcome","n":` + strings.Repeat("1", 50) + `}`)
	result := json.RawMessage(`{"r":"` + strings.Repeat("x", 1018) + `"}`) // 1 KiB
	for _, sh := range []struct {
		name   string
		job    fsm.NewJob
		finish func(id string, lease uint64) fsm.Cmd // nil: left pending
	}{
		{name: "Pending", job: fsm.NewJob{Command: "true"}},
		{name: "PendingWithPayload100B", job: fsm.NewJob{Type: "email", Payload: payload}},
		{name: "PendingWith10Metadata", job: fsm.NewJob{Command: "true", Metadata: meta}},
		{name: "Done", job: fsm.NewJob{Command: "true", Retention: int64(24 * time.Hour)}, finish: func(id string, lease uint64) fsm.Cmd {
			return report(fsm.Report{JobID: id, Lease: lease, Success: true, ExitCode: intp(0), Final: true})
		}},
		{name: "DoneWithResult1KiB", job: fsm.NewJob{Command: "true", Retention: int64(24 * time.Hour)}, finish: func(id string, lease uint64) fsm.Cmd {
			return report(fsm.Report{JobID: id, Lease: lease, Success: true, ExitCode: intp(0), Final: true, Result: result})
		}},
		{name: "FailedWithError200B", job: fsm.NewJob{Command: "true", MaxAttempts: 1, Retention: int64(24 * time.Hour)}, finish: func(id string, lease uint64) fsm.Cmd {
			return report(fsm.Report{JobID: id, Lease: lease, ExitCode: intp(1), Final: true, Error: strings.Repeat("e", 200)})
		}},
	} {
		b.Run(sh.name, func(b *testing.B) {
			for range b.N {
				perJob := sizeOfJobs(b, sh.job, sh.finish, sizingJobs)
				b.ReportMetric(perJob, "B/job")
			}
		})
	}
}

// sizeOfJobs applies n jobs like job (finished with finish when set) to a
// new state file and returns the bytes in use per job.
func sizeOfJobs(b *testing.B, job fsm.NewJob, finish func(string, uint64) fsm.Cmd, n int) float64 {
	b.Helper()
	a := fsmtest.NewApplier(b, t0)
	ctx := context.Background()
	before, err := a.FSM.StoreSize()
	if err != nil {
		b.Fatal(err)
	}
	const batch = 250 // the most one claim takes
	for done := 0; done < n; done += batch {
		jobs := make([]fsm.NewJob, batch)
		for i := range jobs {
			jobs[i] = job
		}
		if _, err := a.Propose(ctx, submit(jobs...)); err != nil {
			b.Fatal(err)
		}
		if finish == nil {
			continue
		}
		res, err := a.Propose(ctx, claimCmd(fsm.Claim{WorkerID: "w1", Shell: true, Max: batch, LeaseTTL: int64(time.Minute)}))
		if err != nil || len(res.Jobs) != batch {
			b.Fatalf("claimed %d of %d: %v", len(res.Jobs), batch, err)
		}
		var reports []fsm.Cmd
		for _, j := range res.Jobs {
			reports = append(reports, finish(j.ID, j.Lease))
		}
		if _, err := a.ProposeTogether(ctx, reports); err != nil {
			b.Fatal(err)
		}
	}
	after, err := a.FSM.StoreSize()
	if err != nil {
		b.Fatal(err)
	}
	return float64(after.InUseBytes-before.InUseBytes) / float64(n)
}
