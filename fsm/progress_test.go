package fsm_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func TestProgress(t *testing.T) {
	running := func(t *testing.T) (*harness, *store.Job) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Slots: 2}))
		h.submit(fsm.NewJob{Command: "a", MaxAttempts: 3})
		return h, h.claimOne("w1")
	}

	t.Run("HeartbeatKeepsTheLatestProgress", func(t *testing.T) {
		h, j := running(t)
		h.at(time.Second).ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease, Progress: &fsm.LeaseProgress{Percent: 10, Message: "start"}}))
		h.at(2 * time.Second).ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease, Progress: &fsm.LeaseProgress{Percent: 40, Message: "copying"}}))
		got := h.job(j.ID)
		want := store.Progress{Percent: 40, Message: "copying", At: ns(t0.Add(2 * time.Second))}
		if got.Progress == nil || *got.Progress != want {
			t.Fatalf("progress = %+v, want %+v", got.Progress, want)
		}
		if got.LeaseDeadline != ns(h.now.Add(ttl)) {
			t.Fatalf("deadline %d, want renewed to now+ttl", got.LeaseDeadline)
		}
		// A heartbeat without progress renews and keeps it.
		h.at(3 * time.Second).ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease}))
		if got := h.job(j.ID).Progress; got == nil || *got != want {
			t.Fatalf("after a heartbeat without progress: %+v, want %+v", got, want)
		}
	})

	t.Run("AJobsOwnHeartbeatKeepsTheLatestProgressToo", func(t *testing.T) {
		h, j := running(t)
		hb := jobHeartbeat(j.ID, j.Lease, &fsm.LeaseProgress{Percent: 30, Message: "seed"})
		h.at(time.Second).ok(hb)
		want := store.Progress{Percent: 30, Message: "seed", At: ns(t0.Add(time.Second))}
		got := h.job(j.ID)
		if got.Progress == nil || *got.Progress != want || got.LeaseDeadline != ns(h.now.Add(ttl)) {
			t.Fatalf("progress %+v deadline %d, want %+v and the lease renewed", got.Progress, got.LeaseDeadline, want)
		}
		// Without progress it renews and keeps it; with it, held to its
		// limits as a worker heartbeat's.
		h.at(2 * time.Second).ok(heartbeat(j.ID, j.Lease, ttl))
		if got := h.job(j.ID); got.Progress == nil || *got.Progress != want || got.LeaseDeadline != ns(h.now.Add(ttl)) {
			t.Fatalf("after a heartbeat without progress: %+v, want %+v kept", got.Progress, want)
		}
		h.ok(jobHeartbeat(j.ID, j.Lease, &fsm.LeaseProgress{Percent: 250}))
		if p := h.job(j.ID).Progress; p.Percent != 100 || p.Message != "" {
			t.Fatalf("progress %+v, want 100 and no message", p)
		}
		// A stale lease's progress is refused with the heartbeat.
		h.reject(jobHeartbeat(j.ID, j.Lease+1, &fsm.LeaseProgress{Percent: 1}), fsm.ErrStaleLease)
		if p := h.job(j.ID).Progress; p.Percent != 100 {
			t.Fatalf("a stale heartbeat's progress was stored: %+v", p)
		}
	})

	t.Run("OutOfBoundsProgressIsHeldToItsLimits", func(t *testing.T) {
		h, j := running(t)
		long := strings.Repeat("é", fsm.MaxProgressMessage) // 2 bytes each
		h.ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease, Progress: &fsm.LeaseProgress{Percent: 140, Message: long}}))
		p := h.job(j.ID).Progress
		if p.Percent != 100 || len(p.Message) != fsm.MaxProgressMessage || p.Message != long[:fsm.MaxProgressMessage] {
			t.Fatalf("progress = %d %q (%d bytes), want 100 and the message cut to %d bytes", p.Percent, p.Message, len(p.Message), fsm.MaxProgressMessage)
		}
		h.ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease, Progress: &fsm.LeaseProgress{Percent: -3}}))
		if p := h.job(j.ID).Progress; p.Percent != 0 {
			t.Fatalf("percent = %d, want 0", p.Percent)
		}
	})

	t.Run("StaleLeaseProgressIsIgnored", func(t *testing.T) {
		h, j := running(t)
		h.ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease + 7, Progress: &fsm.LeaseProgress{Percent: 50}}))
		if p := h.job(j.ID).Progress; p != nil {
			t.Fatalf("progress of another attempt stored: %+v", p)
		}
	})

	t.Run("FinishedJobKeepsItsLastProgressAndANewAttemptClearsIt", func(t *testing.T) {
		h, j := running(t)
		h.ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease, Progress: &fsm.LeaseProgress{Percent: 60, Message: "half"}}))
		h.ok(fail(j.ID, j.Lease, "boom"))
		if p := h.job(j.ID).Progress; p == nil || p.Percent != 60 {
			t.Fatalf("failed attempt's progress = %+v, want kept", p)
		}
		h.at(time.Hour)
		again := h.claimOne("w1")
		if p := h.job(again.ID).Progress; p != nil {
			t.Fatalf("new attempt starts with progress %+v, want none", p)
		}
		h.ok(listedHeartbeat("w1", fsm.LeaseRef{JobID: j.ID, Lease: again.Lease, Progress: &fsm.LeaseProgress{Percent: 100, Message: "all"}}))
		h.ok(succeed(j.ID, again.Lease))
		if p := h.job(j.ID).Progress; p == nil || p.Percent != 100 || p.Message != "all" {
			t.Fatalf("done job's progress = %+v, want the last one", p)
		}
		if got := snapshotRestore(t, h.f); digest(t, got) != digest(t, h.f) {
			t.Fatal("snapshot round trip changed the state")
		}
	})
}

func TestResult(t *testing.T) {
	running := func(t *testing.T) (*harness, *store.Job) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a", MaxAttempts: 3})
		return h, h.claimOne("w1")
	}

	t.Run("ReportStoresTheResult", func(t *testing.T) {
		h, j := running(t)
		h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Result: json.RawMessage(`{"rows":12}`)}))
		got := h.job(j.ID)
		if got.Status != store.StatusDone || string(got.Result) != `{"rows":12}` {
			t.Fatalf("job %s result %s, want done with the result", got.Status, got.Result)
		}
		if r := snapshotRestore(t, h.f); string(mustJob(t, r, j.ID).Result) != `{"rows":12}` {
			t.Fatal("snapshot lost the result")
		}
	})

	t.Run("AReportWithoutResultKeepsTheStoredOne", func(t *testing.T) {
		h, j := running(t)
		h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Error: "partial", Result: json.RawMessage(`[1]`)}))
		h.at(time.Hour)
		again := h.claimOne("w1")
		h.ok(succeed(j.ID, again.Lease))
		if got := h.job(j.ID).Result; string(got) != `[1]` {
			t.Fatalf("result = %s, want the earlier attempt's [1]", got)
		}
	})

	t.Run("AReportKeepsTheProgressNoHeartbeatCarried", func(t *testing.T) {
		h, j := running(t)
		h.at(time.Second).ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Progress: &fsm.LeaseProgress{Percent: 100, Message: "all rows"}}))
		want := store.Progress{Percent: 100, Message: "all rows", At: ns(t0.Add(time.Second))}
		if got := h.job(j.ID); got.Progress == nil || *got.Progress != want || got.Result != nil {
			t.Fatalf("progress %+v result %s, want %+v and no result", got.Progress, got.Result, want)
		}
	})

	t.Run("TooLargeIsRefused", func(t *testing.T) {
		// (A result that is not JSON is neither encoded nor decoded.)
		h, j := running(t)
		quoted := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
		res := quoted(fsm.MaxResultBytes + 1)
		r := h.reject(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Result: res}), nil)
		var ve *fsm.ValidationError
		if !errors.As(r.Err, &ve) || ve.Field != "result" {
			t.Fatalf("err = %v, want a ValidationError of field result", r.Err)
		}
		h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Result: quoted(fsm.MaxResultBytes)})) // at the limit
	})
}

func mustJob(t *testing.T, f *fsm.FSM, id string) *store.Job {
	t.Helper()
	for _, j := range allJobs(t, f) {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("no job %s", id)
	return nil
}

func jobHeartbeat(id string, lease uint64, p *fsm.LeaseProgress) fsm.Cmd {
	c := heartbeat(id, lease, ttl)
	c.Heartbeat.Progress = p
	return c
}

func TestProgressProtocol(t *testing.T) {
	withProgress := listedHeartbeat("w", fsm.LeaseRef{JobID: "job-1", Lease: 1, Progress: &fsm.LeaseProgress{Percent: 5}})
	jobWithProgress := jobHeartbeat("job-1", 1, &fsm.LeaseProgress{Percent: 7, Message: "m"})
	jobPlain := jobHeartbeat("job-1", 1, nil)
	plainListed := listedHeartbeat("w", fsm.LeaseRef{JobID: "job-1", Lease: 1})
	withResult := report(fsm.Report{JobID: "job-1", Lease: 1, Success: true, Result: json.RawMessage(`1`)})
	plainReport := report(fsm.Report{JobID: "job-1", Lease: 1, Success: true})
	withLastProgress := report(fsm.Report{JobID: "job-1", Lease: 1, Success: true, Progress: &fsm.LeaseProgress{Percent: 100}})

	t.Run("NeedsProtocol3OnlyWhenSet", func(t *testing.T) {
		for _, c := range []struct {
			name string
			cmd  fsm.Cmd
			want int
		}{
			{"HeartbeatWithProgress", withProgress, fsm.ProtocolProgress},
			{"HeartbeatWithout", plainListed, 1},
			{"JobHeartbeatWithProgress", jobWithProgress, fsm.ProtocolProgress},
			{"JobHeartbeatWithout", jobPlain, 1},
			{"ReportWithResult", withResult, fsm.ProtocolProgress},
			{"ReportWithout", plainReport, 1},
			{"ReportWithProgress", withLastProgress, fsm.ProtocolProgress},
		} {
			if got := c.cmd.Protocol(); got != c.want {
				t.Errorf("%s: protocol %d, want %d", c.name, got, c.want)
			}
		}
		if fsm.ProtocolProgress != 3 {
			t.Fatalf("ProtocolProgress = %d, want 3", fsm.ProtocolProgress)
		}
	})

	t.Run("WithoutThemTheBytesAreTheOldOnes", func(t *testing.T) {
		// Op codes 4 and 5, as every earlier release wrote them.
		for _, c := range []struct {
			cmd  fsm.Cmd
			code byte
		}{{plainListed, 4}, {plainReport, 5}, {withProgress, 14}, {withResult, 13}, {withLastProgress, 13}, {jobPlain, 3}, {jobWithProgress, 16}} {
			b := mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{c.cmd}})
			if b[3] != c.code { // version, now 0, one command, then the code
				t.Errorf("%s: op code %d, want %d", c.cmd.Op, b[3], c.code)
			}
		}
	})

	t.Run("RoundTrips", func(t *testing.T) {
		e := &fsm.Entry{Now: 7, Cmds: []fsm.Cmd{withProgress, withResult, withLastProgress, jobWithProgress}}
		got := mustDecode(t, mustEncode(t, e))
		if got.Cmds[0].WorkerHeartbeat.Leases[0].Progress.Percent != 5 || string(got.Cmds[1].Report.Result) != "1" ||
			got.Cmds[2].Report.Result != nil || got.Cmds[2].Report.Progress.Percent != 100 ||
			!reflect.DeepEqual(got.Cmds[3], jobWithProgress) {
			t.Fatalf("round trip = %s", dump(got))
		}
	})
}
