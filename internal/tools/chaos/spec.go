package chaos

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/workron/workron/api/wire"
)

// chaosQueue is the queue every job of the run goes to.
const chaosQueue = "chaos"

// Job outcomes: what a job's command does, for real and virtual workers.
const (
	outcomeOK      = "ok"      // succeeds quickly
	outcomeFail    = "fail"    // always fails
	outcomeFlaky   = "flaky"   // fails its first attempt, then succeeds
	outcomeTimeout = "timeout" // outlives its 1s timeout
	outcomeSlow    = "slow"    // runs longer than a lease, heartbeating
)

// jobSpec is one job of the load.
type jobSpec struct {
	key, outcome string
	runMS        int
	// tenant, when set, sends the job to limitedQueue with this
	// concurrency key (see limits.go).
	tenant string
}

func (s jobSpec) request() wire.SubmitRequest {
	attempts := 6 // faults eat attempts; leave room
	req := wire.SubmitRequest{Queue: chaosQueue, IdempotencyKey: s.key,
		Metadata: map[string]string{"outcome": s.outcome, "run_ms": strconv.Itoa(s.runMS)},
		Backoff:  &wire.Backoff{Base: "100ms", Max: "1s", Jitter: 0.3}}
	secs := fmt.Sprintf("%d.%03d", s.runMS/1000, s.runMS%1000)
	switch s.outcome {
	case outcomeOK, outcomeSlow:
		req.Command = "sleep " + secs
	case outcomeFail:
		req.Command, attempts = "sleep "+secs+"; exit 3", 2
	case outcomeFlaky:
		req.Command = `sleep ` + secs + `; [ "$WORKRON_ATTEMPT" -ge 2 ] || exit 4`
	case outcomeTimeout:
		req.Command, req.Timeout, attempts = "sleep 30", "1s", 2
	}
	req.MaxAttempts = &attempts
	if s.tenant != "" {
		req.Queue, req.ConcurrencyKey = limitedQueue, s.tenant
	}
	return req
}

// randomSpec draws job number i's outcome and run time.
func randomSpec(rng *rand.Rand, i int) jobSpec {
	s := jobSpec{key: "k" + strconv.Itoa(i), runMS: 20 + rng.IntN(200)}
	switch p := rng.IntN(100); {
	case p < 55:
		s.outcome = outcomeOK
	case p < 65:
		s.outcome = outcomeFail
	case p < 75:
		s.outcome = outcomeFlaky
	case p < 85:
		s.outcome = outcomeTimeout
	default:
		s.outcome, s.runMS = outcomeSlow, 2500+rng.IntN(1500)
	}
	s.tenant = randomTenant(rng)
	return s
}
