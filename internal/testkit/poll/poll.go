// Package poll waits for a condition by asking it again at an interval. It
// is the one poll loop of the tests, the bench and the chaos harness; it
// never sleeps past its context.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Until calls cond at once and then every interval until it returns nil,
// ctx ends or timeout passes (timeout 0: only ctx bounds it). On giving up it
// returns an error wrapping the context's error and naming cond's last
// error; cond is asked a last time when the time is up.
func Until(ctx context.Context, timeout, interval time.Duration, cond func() error) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		last := cond()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if cond() == nil {
				return nil
			}
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

// errFalse is what True's condition says while it does not hold.
var errFalse = fmt.Errorf("condition not met")

// True is Until for a condition that says only whether it holds.
func True(ctx context.Context, timeout, interval time.Duration, cond func() bool) error {
	return Until(ctx, timeout, interval, func() error {
		if cond() {
			return nil
		}
		return errFalse
	})
}

// TB is the part of testing.TB that Wait uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Wait is Until for a test: it fails tb, with cond's last error, when
// timeout passes first.
func Wait(tb TB, timeout, interval time.Duration, cond func() error) {
	tb.Helper()
	if err := Until(context.Background(), timeout, interval, cond); err != nil {
		tb.Fatalf("still waiting after %s: %v", timeout, err)
	}
}
