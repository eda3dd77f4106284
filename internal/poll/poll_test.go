package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntilReturnsOnceCondHolds(t *testing.T) {
	n := 0
	err := Until(context.Background(), 0, time.Millisecond, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Until = %v after %d calls, want nil after 3", err, n)
	}
}

func TestUntilGivesUpWithLastError(t *testing.T) {
	why := errors.New("still pending")
	err := Until(context.Background(), 20*time.Millisecond, time.Millisecond, func() error { return why })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until = %v, want a deadline error", err)
	}
	if got := err.Error(); got != "context deadline exceeded (last: still pending)" {
		t.Fatalf("Until = %q, want it to name the last error", got)
	}
}

func TestTrueStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := True(ctx, time.Hour, time.Hour, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("True = %v, want context.Canceled", err)
	}
	if err := True(ctx, time.Hour, time.Hour, func() bool { return true }); err != nil {
		t.Fatalf("True = %v for a condition that holds", err)
	}
}
