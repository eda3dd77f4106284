package worker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

// TestHoldOff covers what handlers and shell jobs say to be rate-limited
// or snoozed, and the report fields the worker sends for it.
func TestHoldOff(t *testing.T) {
	f := newFakeServer(t)
	startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
		w.Handle("limited", func(ctx context.Context, job *worker.Job) error {
			return fmt.Errorf("call api: %w", worker.RateLimited(30*time.Second, "429 from api"))
		})
		w.Handle("snooze", func(ctx context.Context, job *worker.Job) error {
			return worker.Snooze(5 * time.Minute)
		})
		w.Handle("toolong", func(ctx context.Context, job *worker.Job) error {
			return worker.RateLimited(48*time.Hour, "")
		})
	})

	t.Run("RateLimitedErrorReportsRateLimitedFor", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "limited"}))
		if rep.Kind != "fail" || rep.Req.RateLimitedFor != "30s" || rep.Req.Error != "429 from api" || rep.Req.SnoozeFor != "" {
			t.Fatalf("report = %+v, want fail rate-limited for 30s with the reason", rep)
		}
	})
	t.Run("SnoozeErrorReportsSnoozeFor", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "snooze"}))
		if rep.Kind != "fail" || rep.Req.SnoozeFor != "5m0s" || rep.Req.RateLimitedFor != "" {
			t.Fatalf("report = %+v, want fail snoozed for 5m", rep)
		}
	})
	t.Run("TooLongIsCutToWhatTheServerTakes", func(t *testing.T) {
		rep := f.waitReport(t, f.add(wire.Job{Type: "toolong"}))
		if rep.Req.RateLimitedFor != wire.MaxHoldOff.String() {
			t.Fatalf("report = %+v, want rate-limited for %s", rep, wire.MaxHoldOff)
		}
	})
	t.Run("ErrorsAsFindsThem", func(t *testing.T) {
		var rl *worker.RateLimitedError
		if err := fmt.Errorf("x: %w", worker.RateLimited(time.Second, "r")); !errors.As(err, &rl) || rl.After != time.Second || rl.Reason != "r" {
			t.Errorf("errors.As of a wrapped RateLimited: %v", rl)
		}
		var sn *worker.SnoozeError
		if !errors.As(worker.Snooze(time.Minute), &sn) || sn.After != time.Minute {
			t.Errorf("errors.As of Snooze: %v", sn)
		}
	})

	shell := []struct {
		name, cmd       string
		limited, snooze string
	}{
		{"ShellExit75WithoutALineIsAnOrdinaryFailure", "echo busy; exit 75", "", ""},
		{"ShellExit75WithABadLineIsAnOrdinaryFailure", "echo " + worker.RetryAfterLine + "soon; exit 75", "", ""},
		{"ShellRetryAfterLineSetsTheTime", "echo " + worker.RetryAfterLine + "45s; exit 75", "45s", ""},
		{"ShellSnoozeLineSnoozes", "echo " + worker.SnoozeLine + "2m; echo bye; exit 75", "", "2m0s"},
		{"ShellLinesWithoutExit75AreAPlainFailure", "echo " + worker.RetryAfterLine + "45s; exit 3", "", ""},
	}
	for _, c := range shell {
		t.Run(c.name, func(t *testing.T) {
			rep := f.waitReport(t, f.add(wire.Job{Command: c.cmd}))
			if rep.Kind != "fail" || rep.Req.RateLimitedFor != c.limited || rep.Req.SnoozeFor != c.snooze {
				t.Fatalf("report = %+v, want rate_limited_for %q snooze_for %q", rep, c.limited, c.snooze)
			}
		})
	}
}
