package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/leader"
	wnode "github.com/workron/workron/node" // "node" is a type of the e2e tests
)

// gangFlags are the `workron server` flags of worker liveness and gangs.
type gangFlags struct {
	offlineAfter, reserveTimeout, drainTimeout, admissionInterval, forgetAfter time.Duration
	maxWorkersPerToken                                                         int
}

func (f *gangFlags) register(fs *flag.FlagSet) {
	def := leader.DefaultAdmissionConfig()
	fs.DurationVar(&f.offlineAfter, "worker-offline-after", 0, "how long a silent worker counts as active; then its leases and reservations are ended (default 3 lease TTLs)")
	fs.DurationVar(&f.forgetAfter, "forget-workers-after", def.ForgetWorkersAfter, "how long a silent worker holding no job stays listed before the leader forgets it (0: never)")
	fs.IntVar(&f.maxWorkersPerToken, "max-workers-per-token", api.DefaultConfig().MaxWorkersPerToken, "worker ids one token may have active at once (all workers together without tokens); a new one beyond gets 429 too_many_workers")
	fs.DurationVar(&f.reserveTimeout, "reserve-timeout", def.ReserveTimeout, "how long a gang's reservation waits for its workers to claim their tasks before it rolls back")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", def.DrainTimeout, "how long a draining gang waits for preempted tasks to be acknowledged before it force-drains them")
	fs.DurationVar(&f.admissionInterval, "admission-interval", def.Interval, "how often the leader places waiting gangs and checks their timeouts")
}

func (f *gangFlags) configure(nc *wnode.Config) error {
	if f.maxWorkersPerToken < 1 {
		return fmt.Errorf("--max-workers-per-token must be at least 1, got %d", f.maxWorkersPerToken)
	}
	nc.Liveness.OfflineAfter = f.offlineAfter
	nc.API.MaxWorkersPerToken = f.maxWorkersPerToken
	a := &nc.Leader.Admission
	a.ReserveTimeout, a.DrainTimeout, a.Interval = f.reserveTimeout, f.drainTimeout, f.admissionInterval
	a.ForgetWorkersAfter = f.forgetAfter
	return nil
}
