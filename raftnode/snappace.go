package raftnode

import (
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/time/rate"
)

// pacedSink writes a snapshot no faster than its limiter allows. A node
// writes its snapshot (a copy of the whole state file) while it commits,
// on the same disk and cores: unpaced, a ~70 MB copy in a quarter of a
// second stalled the other nodes' log writes and applies of that moment
// for up to 30 ms. Paced, the same bytes go out over a longer time with
// room between them. Once stop closes (the node is shutting down) the rest
// is written unpaced, so shutdown never waits on the pace.
type pacedSink struct {
	raft.SnapshotSink
	lim  *rate.Limiter
	stop <-chan struct{}
	// now and sleep are the clock and the wait (d, or until stop closes);
	// tests replace them.
	now   func() time.Time
	sleep func(d time.Duration, stop <-chan struct{})
}

// paceChunk is the most a write hands the sink between waits.
const paceChunk = 256 << 10

func newPacedSink(sink raft.SnapshotSink, bytesPerSec int64, stop <-chan struct{}) *pacedSink {
	return &pacedSink{
		SnapshotSink: sink,
		lim:          rate.NewLimiter(rate.Limit(bytesPerSec), paceChunk),
		stop:         stop,
		now:          time.Now,
		sleep:        sleepOrStop,
	}
}

func (p *pacedSink) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		c := b[:min(len(b), paceChunk)]
		select {
		case <-p.stop:
		default:
			now := p.now() // Delay would read the wall clock, not p.now
			if d := p.lim.ReserveN(now, len(c)).DelayFrom(now); d > 0 {
				p.sleep(d, p.stop)
			}
		}
		k, err := p.SnapshotSink.Write(c)
		written += k
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}

func sleepOrStop(d time.Duration, stop <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}
