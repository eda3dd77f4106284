package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// A third of the load goes to a queue with flow-control limits, spread
// over a few concurrency keys of unequal weight (one hot tenant), so that
// both limits bind now and then. The check reads every attempt of the
// queue's jobs after the run and finds the most leases held at once, in
// all and per key, through every fault (jobcheck.Limits says what that
// proves and what it cannot see).
const (
	limitedQueue        = "chaos-limited"
	limitConcurrency    = 4
	limitKeyConcurrency = 2
)

// tenants are the concurrency keys of the limited queue's jobs, each with
// its weight out of 100.
var tenants = []struct {
	key    string
	weight int
}{{"acme", 50}, {"globex", 30}, {"initech", 20}}

// randomTenant draws a job's key: "" (the unlimited queue) two times in
// three, else a tenant by weight.
func randomTenant(rng *rand.Rand) string {
	if rng.IntN(3) != 0 {
		return ""
	}
	p := rng.IntN(100)
	for _, t := range tenants {
		if p < t.weight {
			return t.key
		}
		p -= t.weight
	}
	return tenants[0].key
}

// setLimits gives the limited queue its limits before any job is
// submitted to it.
func setLimits(ctx context.Context, c *cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l := wire.QueueLimits{Concurrency: wire.Limit(limitConcurrency), KeyConcurrency: wire.Limit(limitKeyConcurrency)}
	return c.sendAny(ctx, http.MethodPut, "/queues/"+limitedQueue, l, func(s int) bool { return s == http.StatusOK })
}

// limitResult is what the limits check saw: the most leases of the
// limited queue held at once, in all and by one key.
type limitResult struct {
	Attempts int
	Peaks    jobcheck.LimitPeaks
}

// checkLimits checks that the limited queue's leases never exceeded its
// limits.
func checkLimits(jobs []wire.Job, res *checkResult) {
	var limited []wire.Job
	for _, j := range jobs {
		if j.Queue == limitedQueue {
			limited = append(limited, j)
		}
	}
	leases := jobcheck.Leases(limited)
	peaks, problems := jobcheck.Limits(leases, limitConcurrency, limitKeyConcurrency)
	res.Limits = limitResult{Attempts: len(leases), Peaks: peaks}
	for _, p := range problems {
		res.anomaly("queue %s: %s", limitedQueue, p)
	}
}

func (r limitResult) String() string {
	return fmt.Sprintf("%d attempts; at most %d running at once (limit %d), %d of one key (limit %d)",
		r.Attempts, r.Peaks.Queue, limitConcurrency, r.Peaks.Key, limitKeyConcurrency)
}
