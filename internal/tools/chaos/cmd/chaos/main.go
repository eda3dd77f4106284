//go:build unix

// Command chaos runs Workron's chaos harness (package internal/tools/chaos): a
// real cluster of workron processes under load and faults, then checks that
// no accepted job was lost, no attempt was claimed or accepted twice, the
// replicas are identical, and the recorded history is linearizable.
//
//	go run ./internal/tools/chaos/cmd/chaos --short                 # about 2 minutes, as CI runs it
//	go run ./internal/tools/chaos/cmd/chaos --duration 30m --seed 7 # a long run; --seed replays a run's faults
//
// Network partitions need root (network namespaces); without it the
// harness says so and runs every other fault. It exits 1 when it finds an
// anomaly and keeps the run's directory (logs, history.jsonl, and an HTML
// visualization of each non-linearizable job) for a post-mortem.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/workron/workron/internal/tools/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		cfg      chaos.Config
		short    bool
		faults   string
		asJSON   bool
		noNetns  bool
		duration time.Duration
	)
	flag.BoolVar(&short, "short", false, "CI mode: 75s of faults on 3 nodes (about 2 minutes in all)")
	flag.DurationVar(&duration, "duration", 0, "how long load and faults run (default 90s; --short: 75s)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of every random choice (default: the time; printed at start)")
	flag.IntVar(&cfg.Nodes, "nodes", 3, "scheduler nodes: 3 or 5")
	flag.IntVar(&cfg.RealWorkers, "workers", 2, "real `workron worker` processes")
	flag.IntVar(&cfg.VirtualWorkers, "virtual-workers", 6, "recorded workers run by the harness")
	flag.Float64Var(&cfg.SubmitRate, "rate", 8, "jobs submitted per second")
	flag.StringVar(&faults, "faults", "all", "comma-separated faults, \"all\" or \"none\": "+strings.Join(chaos.AllFaults, ","))
	flag.StringVar(&cfg.Dir, "dir", "", "directory for data, logs and the history (default: a temporary one, removed after a clean run)")
	flag.IntVar(&cfg.DurableWorkers, "durable-workers", 2, "chaosworker processes serving durable jobs (negative: none)")
	flag.Float64Var(&cfg.DurableRate, "durable-rate", 1.5, "durable jobs submitted per second")
	flag.BoolVar(&cfg.PlantRerun, "plant-rerun", false, "plant a fault to see the durable checks catch it: the durable workers run their first step again after the first attempt")
	flag.StringVar(&cfg.Bin, "bin", "", "workron binary to run (default: build ./cmd/workron)")
	flag.DurationVar(&cfg.DrainTimeout, "drain-timeout", 60*time.Second, "after healing, how long the drain may go without any job finishing")
	flag.BoolVar(&noNetns, "no-netns", false, "stay on loopback even as root (no partitions)")
	flag.BoolVar(&asJSON, "json", false, "print the report as JSON")
	recheck := flag.String("recheck", "", "only run the checks again on a kept run's directory")
	flag.Parse()
	if *recheck != "" {
		anomalies, err := chaos.Recheck(*recheck)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
		fmt.Printf("anomalies       %d\n", len(anomalies))
		for _, a := range anomalies {
			fmt.Printf("  - %s\n", a)
		}
		if len(anomalies) > 0 {
			return 1
		}
		return 0
	}
	cfg.NoNetns = noNetns
	cfg.Duration = duration
	if short && duration == 0 {
		cfg.Duration = 75 * time.Second
	}
	switch faults {
	case "all", "":
	case "none":
		cfg.Faults = []string{}
	default:
		cfg.Faults = strings.Split(faults, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
	} else {
		printReport(rep)
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

func printReport(r *chaos.Report) {
	fmt.Printf("seed            %d  (replay: --seed %d --nodes %d --duration %s)\n", r.Seed, r.Seed, r.Nodes, r.Duration)
	fmt.Printf("network         %s\n", r.Network)
	fmt.Printf("elapsed         %s (%s of faults)\n", r.Elapsed.Round(time.Second), r.Duration)
	var kinds []string
	for k, v := range r.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(kinds)
	fmt.Printf("faults          %d: %s\n", r.FaultsTotal, strings.Join(kinds, ", "))
	for _, e := range r.FaultErrors {
		fmt.Printf("fault error     %s\n", e)
	}
	fmt.Printf("jobs            %d submitted, %d accepted, %d in the cluster: %d done, %d failed, %d waiting for a retry\n",
		r.Submitted, r.Accepted, r.Jobs, r.Done, r.Failed, r.Pending)
	fmt.Printf("requests        %d; %d recorded operations, %d with unknown outcome, %d unknown claims matched to attempts\n",
		r.Requests, r.Ops, r.UnknownOps, r.Synthesized)
	fmt.Printf("linearizability %d job histories checked\n", r.Linearizable)
	fmt.Printf("schedule        %d ticks of @every 1s: %d run, %d missed beyond catch-up\n", r.CronTicks, r.CronJobs, r.CronMissed)
	fmt.Printf("durable jobs    %d accepted: %d done, %d failed; %d step runs, %d recorded, %d never recorded (run again), %d by stale attempts\n",
		r.DurableJobs, r.DurableDone, r.DurableFailed, r.StepRuns, r.StepRecords, r.StepUnrecorded, r.StepStale)
	fmt.Printf("parking         %d sleeps woke; %d events heard (%d sent before the wait), %d waits timed out, %d events lost to a clock jump; %d child jobs\n",
		r.Sleeps, r.EventsHeard, r.EventsBefore, r.WaitTimeouts, r.EventsExcused, r.Children)
	fmt.Printf("replicas        applied index %d on every node, digest %.16s\n", r.AppliedIndex, r.Digest)
	fmt.Printf("anomalies       %d\n", len(r.Anomalies))
	for _, a := range r.Anomalies {
		fmt.Printf("  - %s\n", a)
	}
	if r.Dir != "" {
		fmt.Printf("kept            %s (logs, history.jsonl)\n", r.Dir)
	}
}
