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

type fakeTB struct{ failed string }

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = format }

func TestWaitFailsTheTestOnTimeout(t *testing.T) {
	var tb fakeTB
	Wait(&tb, 10*time.Millisecond, time.Millisecond, func() error { return errors.New("never") })
	if tb.failed == "" {
		t.Fatal("Wait did not fail the test")
	}
	tb = fakeTB{}
	Wait(&tb, time.Second, time.Millisecond, func() error { return nil })
	if tb.failed != "" {
		t.Fatal("Wait failed a test whose condition held")
	}
}
