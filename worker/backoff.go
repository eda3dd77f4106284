package worker

import (
	"context"
	"time"
)

// backoff yields pauses that double from lo up to hi.
type backoff struct {
	lo, hi, cur time.Duration
}

func newBackoff(lo, hi time.Duration) *backoff {
	return &backoff{lo: lo, hi: hi}
}

// next returns the next pause.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.lo
	} else {
		b.cur = min(2*b.cur, b.hi)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits for d and reports true, or reports false as soon as ctx ends.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
