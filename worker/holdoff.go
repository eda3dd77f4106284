package worker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
)

// Backpressure from the work. A handler returns RateLimited or Snooze, a
// shell job prints a line and exits with ExitRateLimited, and the worker
// reports the attempt as rate-limited or snoozed: it does not count
// against the job's max_attempts (up to the server's ceiling of hold-offs
// in a row), and the job is pending again. Rate-limited also pauses the
// job's concurrency key for every worker of the cluster until the time is
// up (at most the queue's max_pause; a job without a key pauses its queue
// only where the queue allows it, else waits alone); a snooze only delays
// the job.

// RateLimitedError is the error of RateLimited; find it with errors.As.
type RateLimitedError struct {
	After  time.Duration // how long the job's key (or queue) pauses
	Reason string        // reported as the attempt's error
}

func (e *RateLimitedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("rate limited for %s", e.After)
	}
	return fmt.Sprintf("rate limited for %s: %s", e.After, e.Reason)
}

// RateLimited returns the error a handler returns when the work met a rate
// limit downstream (an API's 429, say): the attempt does not count, and no
// worker of the cluster claims a job of the same concurrency key for after
// (at most the queue's max_pause). after is bounded to 1ms..24h.
func RateLimited(after time.Duration, reason string) error {
	return &RateLimitedError{After: after, Reason: reason}
}

// SnoozeError is the error of Snooze; find it with errors.As.
type SnoozeError struct {
	After time.Duration // how long from now the job runs again
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.After) }

// Snooze returns the error a handler returns to run its job again after
// after, without using an attempt and without pausing anything else (River's
// JobSnooze). after is bounded to 1ms..24h.
func Snooze(after time.Duration) error { return &SnoozeError{After: after} }

// The shell jobs' way of saying the same: exit with ExitRateLimited (75,
// EX_TEMPFAIL of sysexits.h) after printing a line
// "WORKRON_RETRY_AFTER=30s" (rate-limited for that long) or
// "WORKRON_SNOOZE=5m" (snoozed); the last such line wins. Exit 75 without
// either line is an ordinary failure: a program that exits 75 on its own
// (sendmail, rsync, many tools of sysexits.h) neither pauses anything nor
// escapes max_attempts. Print the line last: only the output's tail is
// read.
const (
	ExitRateLimited = 75
	RetryAfterLine  = "WORKRON_RETRY_AFTER="
	SnoozeLine      = "WORKRON_SNOOZE="
)

// holdOff is how an attempt asks not to count: rate-limited or snoozed for
// a duration (both 0: neither).
type holdOff struct {
	rateLimited, snooze time.Duration
	reason              string // the report's error, if not the outcome's
}

func (h holdOff) set() bool { return h.rateLimited != 0 || h.snooze != 0 }

// holdOffOf reads a handler's error.
func holdOffOf(err error) (holdOff, bool) {
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		return holdOff{rateLimited: boundHoldOff(rl.After), reason: rl.Reason}, true
	}
	var sn *SnoozeError
	if errors.As(err, &sn) {
		return holdOff{snooze: boundHoldOff(sn.After)}, true
	}
	return holdOff{}, false
}

// shellHoldOff reads a shell job's exit code and output tail; the error
// says what it asked for. Exit ExitRateLimited without a valid line asks
// for nothing.
func shellHoldOff(code int, output string) (holdOff, error, bool) {
	if code != ExitRateLimited {
		return holdOff{}, nil, false
	}
	var h holdOff
	lines := strings.Split(output, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if v, ok := strings.CutPrefix(line, RetryAfterLine); ok {
			if d, err := time.ParseDuration(v); err == nil {
				h = holdOff{rateLimited: boundHoldOff(d)}
				break
			}
		}
		if v, ok := strings.CutPrefix(line, SnoozeLine); ok {
			if d, err := time.ParseDuration(v); err == nil {
				h = holdOff{snooze: boundHoldOff(d)}
				break
			}
		}
	}
	switch {
	case h.snooze != 0:
		return h, fmt.Errorf("exit status %d: snoozed for %s", code, h.snooze), true
	case h.rateLimited != 0:
		return h, fmt.Errorf("exit status %d: rate limited for %s", code, h.rateLimited), true
	}
	return holdOff{}, nil, false
}

// boundHoldOff keeps d within what the server takes.
func boundHoldOff(d time.Duration) time.Duration {
	return min(max(d, time.Millisecond), wire.MaxHoldOff)
}

// reportFields fills a report's rate_limited_for or snooze_for.
func (h holdOff) reportFields(r *wire.ReportRequest) {
	if h.rateLimited != 0 {
		r.RateLimitedFor = h.rateLimited.String()
		if h.reason != "" {
			r.Error = h.reason
		}
	}
	if h.snooze != 0 {
		r.SnoozeFor = h.snooze.String()
	}
}
