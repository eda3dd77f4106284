package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
)

// steadySubmits sends single submits (POST /jobs, one job each) at
// benchBulkSubmitRate a second to the node it believes leads, each with
// an idempotency key of its own, and tries each one again on the next
// node, benchKillPause later, until it is accepted (for up to
// benchRetryFor): a leader's death costs the client a few failed tries,
// never a job lost or doubled. A submit's latency runs from its first
// try to the reply that accepted it.
type steadySubmits struct {
	b      *bencher
	urls   []string
	queue  string
	target atomic.Int64 // index of the node submits go to
	t      *tracker
	watch  writeWatch

	mu    sync.Mutex
	subs  []steadySubmit
	fails map[string]int // failed tries by kind
	lost  []string
}

// steadySubmit is one accepted submit.
type steadySubmit struct {
	sent, accepted time.Time
	tries          int
}

func newSteadySubmits(b *bencher, urls []string, leader int, queue string) *steadySubmits {
	s := &steadySubmits{b: b, urls: urls, queue: queue, t: newTracker(), fails: map[string]int{}}
	s.target.Store(int64(leader))
	return s
}

// run submits one job every 1/benchBulkSubmitRate s until ctx ends, each
// in its own goroutine, and waits for those under way.
func (s *steadySubmits) run(ctx context.Context) {
	tick := time.NewTicker(time.Second / benchBulkSubmitRate)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("%s-%d", s.queue, i)
		wg.Go(func() { s.one(context.WithoutCancel(ctx), key) })
	}
}

// one submits the job of key until it is accepted, rejected or
// benchRetryFor passes.
func (s *steadySubmits) one(ctx context.Context, key string) {
	body := mustJSON(wire.SubmitRequest{Command: "true", Queue: s.queue, IdempotencyKey: key})
	first := time.Now()
	for tries := 1; ; tries++ {
		node := s.target.Load()
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, benchKillRequest)
		var reply jobRef
		st, err := s.b.call(rctx, http.MethodPost, s.urls[node]+"/jobs", body, &reply)
		cancel()
		o := classify(st, err)
		if o == outOK {
			at := time.Now()
			s.t.submitted(reply.ID, first)
			s.watch.accepted(sent, at)
			s.mu.Lock()
			s.subs = append(s.subs, steadySubmit{sent: first, accepted: at, tries: tries})
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.fails[failKind(st, err)]++
		s.mu.Unlock()
		if o == outRejected || time.Since(first) > benchRetryFor {
			s.t.submitUnknown(1)
			s.mu.Lock()
			s.lost = append(s.lost, fmt.Sprintf("submit %s not accepted after %d tries: HTTP %d %v", key, tries, st, err))
			s.mu.Unlock()
			return
		}
		s.target.CompareAndSwap(node, (node+1)%int64(len(s.urls)))
		sleepCtx(ctx, benchKillPause)
	}
}

// failKind names a failed try for the counts: the status of a reply, or
// the transport's failure.
func failKind(st int, err error) string {
	switch {
	case st != 0:
		return fmt.Sprintf("HTTP %d", st)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "no reply in " + benchKillRequest.String()
	}
	return "connection broken"
}

// check lists the submits never accepted and what the tracker saw go wrong
// (two submits answered with one job, a job claimed).
func (s *steadySubmits) check() []string {
	s.mu.Lock()
	out := slices.Clone(s.lost)
	s.mu.Unlock()
	return append(out, s.t.check(false)...)
}

// figures are the submits' p50 and p99 before the bulk action (sent before
// started) and during it (sent from started to ended, those of the
// election aside), and the slowest of the election's (in flight at the
// kill or sent before the first submit sent after it was accepted) with
// every failed try.
func (s *steadySubmits) figures(name string, started, ended time.Time, k killReport, problems []string) []Figure {
	s.mu.Lock()
	defer s.mu.Unlock()
	var before, during, election latencies
	tries := 0
	for _, sub := range s.subs {
		d := sub.accepted.Sub(sub.sent)
		switch {
		case !k.at.IsZero() && sub.accepted.After(k.at) && sub.sent.Before(k.wrote):
			election.add(d)
			tries += sub.tries
		case sub.sent.Before(started):
			before.add(d)
		case sub.sent.Before(ended):
			during.add(d)
		}
	}
	failed := 0
	var kinds []string
	for _, kind := range slices.Sorted(maps.Keys(s.fails)) {
		failed += s.fails[kind]
		kinds = append(kinds, fmt.Sprintf("%d %s", s.fails[kind], kind))
	}
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	window := 0.0
	if !k.at.IsZero() {
		window = k.wrote.Sub(k.at).Seconds()
	}
	how := fmt.Sprintf("POST /jobs of one job at %d a second, first try → the reply that accepted it; a failed try (refused, no reply in %s, a 5xx or 429) counts one error and goes to the next node %s later with the same idempotency key",
		benchBulkSubmitRate, benchKillRequest, benchKillPause)
	fig := func(suffix string, l []float64, p float64, note string) Figure {
		fg := Figure{Figure: name + "_submit_" + suffix, Unit: "ms", Jobs: len(l), Target: "the leader", Value: percentile(l, p), Load1: loadAverage(), Note: how + note}
		fg.check(problems)
		return fg
	}
	b, d, e := before.take(), during.take(), election.take()
	figs := []Figure{
		fig("p50_before", b, 0.50, "; before the bulk action"), fig("p99_before", b, 0.99, "; before the bulk action"),
		fig("p50_during", d, 0.50, "; during the bulk action, the election's aside"), fig("p99_during", d, 0.99, "; during the bulk action, the election's aside"),
		fig("election_max", e, 1, fmt.Sprintf("; the slowest of the %d submits in flight at the kill or sent before the first one sent after it was accepted (%.2f s after the kill), "+
			"%d tries between them; failed tries over the whole run: %s", len(e), window, tries, strings.Join(kinds, ", "))),
	}
	figs[len(figs)-1].Errors = int64(failed)
	return figs
}
