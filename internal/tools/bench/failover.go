package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// Shape of the failover load.
const (
	benchFailoverClients  = 16                    // concurrent submitters
	benchFailoverInterval = 10 * time.Millisecond // least time between one submitter's requests
	benchFailoverTimeout  = 2 * time.Second       // per request
	benchFailoverSettle   = 1 * time.Second       // steady load before each kill
	benchFailoverWait     = 30 * time.Second      // longest a round may wait for a write
)

// failover measures how long writes stop when the leader dies: three
// `workron server` processes (fsync'd, --proc-raft-timeout) take a steady
// submit load through every node in turn; each round SIGKILLs the leader
// and times from the kill to the first 2xx reply of a submit sent after
// it, through whichever node answers, then restarts the killed node and
// waits until all three agree again. It reports the median and the worst
// of --failover-rounds rounds.
//
// The jobs go to a queue nobody serves: every accepted job must be pending
// at the end, on the last leader, beside at most as many more as there
// were submits of unknown outcome.
func (b *bencher) failover(ctx context.Context) ([]Figure, error) {
	const name = "failover"
	c, err := b.startProcCluster(ctx, name)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	w := &writeWatch{}
	var stop atomic.Bool
	var load sync.WaitGroup
	body := mustJSON(wire.SubmitRequest{Command: "true", Queue: queue})
	for i := range benchFailoverClients {
		load.Go(func() { b.failoverClient(ctx, c.URLs(), i, body, t, &errs, w, &stop) })
	}
	defer func() {
		stop.Store(true)
		load.Wait()
	}()

	start := time.Now()
	var rounds []float64
	var each, problems []string
	var terms uint64
	for r := range b.cfg.FailoverRounds {
		d, e, dterm, err := b.failoverRound(ctx, c, w)
		if err != nil {
			problems = append(problems, fmt.Sprintf("round %d: %v", r+1, err))
			break
		}
		rounds = append(rounds, float64(d)/float64(time.Millisecond))
		each = append(each, fmt.Sprintf("%.0f (leader after %.0f)", rounds[len(rounds)-1], float64(e)/float64(time.Millisecond)))
		terms += dterm
	}
	sleepCtx(ctx, benchFailoverSettle) // the load runs on the healed cluster
	stop.Store(true)
	load.Wait()
	elapsed := time.Since(start)

	fg := Figure{Unit: "ms", Clients: benchFailoverClients, Target: "any node", Jobs: t.accepted(), Errors: errs.Load(),
		Seconds: elapsed.Seconds(), Load1: loadAverage(), Elections: float64(terms)}
	fg.Note = fmt.Sprintf("3 server processes, Raft timeouts %s; SIGKILL the leader → first 2xx POST /jobs sent after the kill, "+
		"%d submitters through every node in turn, every %s; rounds, ms: %s; bounded by failure detection (a follower stands "+
		"1 to 3 heartbeat timeouts after its last contact: its timer is random in [T, 2T) and rearms while contact is recent) and the election",
		b.cfg.ProcRaftTimeout, benchFailoverClients, benchFailoverInterval, strings.Join(each, ", "))
	if len(rounds) < b.cfg.FailoverRounds {
		problems = append(problems, fmt.Sprintf("%d of %d rounds measured", len(rounds), b.cfg.FailoverRounds))
	}
	li, _, err := c.leader(ctx, b)
	if err == nil {
		problems = append(problems, b.verifyQueue(ctx, c.Nodes[li].URL, queue, wire.StatusPending, t)...)
	} else {
		problems = append(problems, err.Error())
	}
	fg.check(problems, t.check(false))
	slices.Sort(rounds)
	med, worst := fg, fg
	med.Figure, med.Value = "failover_median", percentile(rounds, 0.5)
	worst.Figure, worst.Value = "failover_max", percentile(rounds, 1)
	return []Figure{med, worst}, nil
}

// failoverRound waits until all three nodes agree on a leader, lets the
// load run for benchFailoverSettle, kills the leader, waits for the first
// write after the kill, and restarts the killed node. It returns the time
// from the kill to that write, the time until a survivor said it leads,
// and the terms that began.
func (b *bencher) failoverRound(ctx context.Context, c *procCluster, w *writeWatch) (time.Duration, time.Duration, uint64, error) {
	if err := c.WaitFormed(ctx, 60*time.Second); err != nil {
		return 0, 0, 0, err
	}
	sleepCtx(ctx, benchFailoverSettle)
	li, h, err := c.leader(ctx, b)
	if err != nil {
		return 0, 0, 0, err
	}
	n := c.Nodes[li]
	if !n.Signal(syscall.SIGKILL) {
		return 0, 0, 0, fmt.Errorf("kill the leader %s: it is not running", n.Name)
	}
	killed := time.Now()
	wrote := w.arm(killed)
	n.Kill() // reap it
	ectx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	elected := make(chan time.Duration, 1)
	go func() { elected <- c.waitNewLeader(ectx, b, li, killed) }()
	var d time.Duration
	select {
	case at := <-wrote:
		d = at.Sub(killed)
	case <-time.After(benchFailoverWait):
		return 0, 0, 0, fmt.Errorf("no write accepted within %s of killing the leader %s", benchFailoverWait, n.Name)
	case <-ctx.Done():
		return 0, 0, 0, ctx.Err()
	}
	e := <-elected
	nl, nh, err := c.leader(ctx, b)
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := n.Start(); err != nil {
		return 0, 0, 0, err
	}
	b.progress("bench: failover: killed %s (term %d); %s leads in term %d; a survivor said it leads after %.0f ms, the first write after %.0f ms",
		n.Name, h.Term, c.Nodes[nl].Name, nh.Term, e.Seconds()*1000, d.Seconds()*1000)
	return d, e, nh.Term - h.Term, nil
}

// waitNewLeader polls the nodes other than old every 5ms until one says it
// leads, and returns the time since killed (0 if none did within
// benchFailoverWait).
func (c *procCluster) waitNewLeader(ctx context.Context, b *bencher, old int, killed time.Time) time.Duration {
	var at time.Duration
	_ = poll.True(ctx, benchFailoverWait, 5*time.Millisecond, func() bool {
		for i, n := range c.Nodes {
			var h wire.Health
			rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			st, err := b.call(rctx, http.MethodGet, n.URL+"/health", nil, &h)
			cancel()
			if i != old && err == nil && st == http.StatusOK && h.Role == "leader" {
				at = time.Since(killed)
				return true
			}
		}
		return false
	})
	return at
}

// failoverClient submits one job at a time, each request to the next node
// in turn, at most every benchFailoverInterval (failed or not, so the first
// write after a kill is seen within about that), until stop. Every accepted
// write is told to w.
func (b *bencher) failoverClient(ctx context.Context, urls []string, i int, body []byte, t *tracker, errs *atomic.Int64, w *writeWatch, stop *atomic.Bool) {
	for next := i; !stop.Load() && ctx.Err() == nil; next++ {
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, benchFailoverTimeout)
		var reply jobRef
		st, err := b.call(rctx, http.MethodPost, urls[next%len(urls)]+"/jobs", body, &reply)
		cancel()
		switch o := classify(st, err); {
		case o == outOK:
			t.submitted(reply.ID, sent)
			w.accepted(sent, time.Now())
		case o == outUnknown && !errors.Is(err, syscall.ECONNREFUSED):
			t.submitUnknown(1) // even when ctx ended: it may have been applied
			errs.Add(1)
		default: // refused: nothing was done
			errs.Add(1)
		}
		sleepCtx(ctx, time.Until(sent.Add(benchFailoverInterval)))
	}
}

// writeWatch tells a failover round when the first write sent after the
// kill was accepted.
type writeWatch struct {
	mu     sync.Mutex
	killed time.Time
	first  chan time.Time // nil when not armed
}

// arm starts watching for a write sent after killed; the channel gets the
// time its reply arrived.
func (w *writeWatch) arm(killed time.Time) <-chan time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.killed, w.first = killed, make(chan time.Time, 1)
	return w.first
}

// accepted records a 2xx reply to a write sent at sent.
func (w *writeWatch) accepted(sent, replied time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first != nil && sent.After(w.killed) {
		w.first <- replied
		w.first = nil
	}
}
