//go:build unix

package chaos

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestChaosShort is the harness's short mode, run by CI: three nodes, two
// real and six virtual workers, 75s of every fault the machine allows (all
// of them as root), then the checks. WORKRON_CHAOS_SEED replays a seed;
// WORKRON_CHAOS_DURATION changes the length.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos harness: starts a cluster and injects faults for over a minute")
	}
	cfg := Config{Duration: 75 * time.Second, DrainTimeout: 60 * time.Second, Log: testWriter{t}}
	if s := os.Getenv("WORKRON_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WORKRON_CHAOS_SEED: %v", err)
		}
		cfg.Seed = seed
	}
	if s := os.Getenv("WORKRON_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("WORKRON_CHAOS_DURATION: %v", err)
		}
		cfg.Duration = d
	}
	if err := canUseNetns(); err != nil {
		t.Logf("%v: partitions are left out", err)
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d; %d faults %v; %d jobs accepted: %d done, %d failed, %d waiting; %d operations (%d unknown) in %d linearizable job histories; schedule: %d ticks, %d run, %d missed; limited queue: %d attempts, at most %d/%d at once, %d/%d of one key; durable: %d jobs (%d done, %d failed), %d step runs, %d recorded, %d never recorded, %d stale, %d sleeps woke, %d events heard (%d sent before the wait), %d waits timed out, %d events lost to a clock jump, %d children; applied index %d everywhere",
		rep.Seed, rep.FaultsTotal, rep.Faults, rep.Accepted, rep.Done, rep.Failed, rep.Pending, rep.Ops, rep.UnknownOps, rep.Linearizable,
		rep.CronTicks, rep.CronJobs, rep.CronMissed, rep.LimitedAttempts, rep.LimitPeak, limitConcurrency, rep.KeyLimitPeak, limitKeyConcurrency,
		rep.DurableJobs, rep.DurableDone, rep.DurableFailed, rep.StepRuns, rep.StepRecords, rep.StepUnrecorded, rep.StepStale,
		rep.Sleeps, rep.EventsHeard, rep.EventsBefore, rep.WaitTimeouts, rep.EventsExcused, rep.Children, rep.AppliedIndex)
	for _, e := range rep.FaultErrors {
		t.Logf("fault error: %s", e)
	}
	for _, a := range rep.Anomalies {
		t.Errorf("anomaly: %s", a)
	}
	if !rep.OK() {
		t.Logf("replay with WORKRON_CHAOS_SEED=%d, or scripts/chaos --seed %d --duration %s; the run's files are in %s",
			rep.Seed, rep.Seed, cfg.Duration, rep.Dir)
	}
}

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-min(1, len(p))]))
	return len(p), nil
}
