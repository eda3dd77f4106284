package leader

import (
	"context"
	"sync"
	"time"
)

// runner is the life of one loop: Start runs it in a goroutine under a
// context of its own, Stop cancels that context and waits for the loop to
// return. A loop runs at most once: Start after Start or after Stop does
// nothing, and Stop is safe to call twice and before Start.
type runner struct {
	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func (r *runner) start(ctx context.Context, run func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started = true
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		run(ctx)
	}()
}

func (r *runner) stop() {
	r.mu.Lock()
	r.started = true // a loop stopped before it started never starts
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// every calls fn once per interval until ctx ends: the shape of the
// leader's periodic loops, whose runOnce tests call directly.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
