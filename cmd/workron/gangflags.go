package main

import (
	"flag"
	"time"

	"github.com/workron/workron/api"
)

// gangFlags are the `workron server` flags of worker liveness and gangs.
type gangFlags struct {
	offlineAfter, reserveTimeout, drainTimeout, admissionInterval time.Duration
}

func (f *gangFlags) register(fs *flag.FlagSet) {
	def := api.DefaultConfig()
	fs.DurationVar(&f.offlineAfter, "worker-offline-after", 0, "how long a silent worker counts as active; then its leases and reservations are ended (default 3 lease TTLs)")
	fs.DurationVar(&f.reserveTimeout, "reserve-timeout", def.ReserveTimeout, "how long a gang's reservation waits for its workers to claim their tasks before it rolls back")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", def.DrainTimeout, "how long a draining gang waits for preempted tasks to be acknowledged before it force-drains them")
	fs.DurationVar(&f.admissionInterval, "admission-interval", def.AdmissionInterval, "how often the leader places waiting gangs and checks their timeouts")
}

func (f *gangFlags) configure(ac *api.Config) {
	ac.WorkerOfflineAfter = f.offlineAfter
	ac.ReserveTimeout, ac.DrainTimeout, ac.AdmissionInterval = f.reserveTimeout, f.drainTimeout, f.admissionInterval
}
