package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/workron/workron/internal/tools/bench"
)

// runBench is `workron bench`: its flags and environment fill a
// bench.Config, and internal/tools/bench runs it (see bench.Run for the
// scenarios). It fails if a correctness check fails, never because of speed.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c                  bench.Config
		short              bool
		servers, scenarios string
	)
	fs.BoolVar(&short, "short", false, "quick correctness run: --jobs 2000 and --duration 3s unless given; well under a minute")
	fs.StringVar(&servers, "server", "", "bench an existing cluster at these node URLs (comma-separated) instead of starting three nodes in-process")
	fs.IntVar(&c.Clients, "clients", 64, "concurrent single-job submitters, virtual workers of the claim scenarios, and slots of claim_done_worker's Go worker")
	fs.IntVar(&c.Jobs, "jobs", 20000, "jobs of submit_single and of each claim scenario; submit_batch and submit_batch_metadata send twice as many")
	fs.Float64Var(&c.Rate, "rate", 200, "submissions per second in the latency scenario")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long the latency scenario submits")
	fs.IntVar(&c.LatencyWorkers, "latency-workers", 8, "one-slot long-polling workers of the latency scenario (1 to 1024)")
	fs.DurationVar(&c.SubmitFor, "submit-for", 0, "run submit_single and the submit_batch scenarios for this long instead of a job count")
	fs.StringVar(&scenarios, "scenarios", strings.Join(bench.Scenarios, ","), "scenarios to run, comma-separated")
	fs.StringVar(&c.Output, "o", "table", "output: table (a table, then one JSON line per figure) or json (JSON lines only)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole process during each scenario's timed phase to `FILE` (FILE.SCENARIO when several run)")
	fs.StringVar(&c.Bin, "bin", "", "workron binary to run as server and worker processes (default: this executable)")
	fs.IntVar(&c.RealJobs, "real-jobs", 5000, "jobs of real_workers (--short: 200)")
	fs.IntVar(&c.FailoverRounds, "failover-rounds", 5, "leader kills of failover (--short: 1)")
	fs.DurationVar(&c.ProcRaftTimeout, "proc-raft-timeout", 500*time.Millisecond, "Raft heartbeat and election timeout of the server processes failover and large_store start")
	fs.IntVar(&c.LargeJobs, "large-jobs", 1_000_000, "finished jobs large_store retains (--short: 2000)")
	fs.IntVar(&c.LargePending, "large-pending", 100_000, "pending jobs large_store holds besides (--short: 200)")
	fs.IntVar(&c.LargeNodes, "large-nodes", 3, "server processes large_store starts: 3, or 1 when three copies of the store do not fit on the disk")
	var minFreeGB int
	fs.IntVar(&minFreeGB, "large-min-free-gb", 10, "GiB of disk large_store leaves free: it refuses to start, skips the join, or stops its servers rather than go below (--short: 0)")
	fs.IntVar(&c.BulkJobs, "bulk-jobs", 100_000, "failed jobs bulk_retry and bulk_retry_kill retry with one bulk action (--short: 2000)")
	fs.IntVar(&c.ResumeSteps, "resume-steps", 9999, "recorded steps of the journals step_resume resumes, at most 9999 (--short: 1000)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if short {
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		def := func(name string, p *int, v int) {
			if !set[name] {
				*p = v
			}
		}
		def("jobs", &c.Jobs, 2000)
		def("real-jobs", &c.RealJobs, 200)
		def("failover-rounds", &c.FailoverRounds, 1)
		def("large-jobs", &c.LargeJobs, 2000)
		def("large-pending", &c.LargePending, 200)
		def("bulk-jobs", &c.BulkJobs, 2000)
		def("resume-steps", &c.ResumeSteps, 1000)
		def("large-min-free-gb", &minFreeGB, 0)
		if !set["duration"] {
			c.Duration = 3 * time.Second
		}
	}
	c.LargeMinFree = int64(minFreeGB) << 30
	c.Servers, c.Scenarios = splitList(servers), splitList(scenarios)
	c.NodeArgs = strings.Fields(os.Getenv("WORKRON_BENCH_NODE_ARGS"))
	c.NodeLogs = os.Getenv("WORKRON_BENCH_LOG") != ""
	c.StartNode = startBenchNode
	c.Stdout, c.Stderr = stdout, stderr
	return bench.Run(ctx, c)
}

// startBenchNode starts one node of the bench's in-process cluster with
// `workron server`'s defaults (state and Raft log fsync'd), its Raft
// timeouts, and any server flags given in WORKRON_BENCH_NODE_ARGS.
func startBenchNode(_ context.Context, nc bench.NodeConfig) (bench.Node, error) {
	fs := flag.NewFlagSet("bench-server", flag.ContinueOnError)
	var f serverFlags
	f.register(fs) // the server's defaults
	f.heartbeat, f.election, f.logs.level = nc.RaftTimeout, nc.RaftTimeout, "error"
	// More server flags the bench was given (--node-args) go over those.
	if err := fs.Parse(nc.Args); err != nil {
		return nil, fmt.Errorf("bench node flags: %w", err)
	}
	// Who the node is and where it lives, whatever the flags said.
	f.id, f.httpAddr, f.raftAddr, f.dataDir = nc.ID, "127.0.0.1:0", "127.0.0.1:0", nc.DataDir
	f.bootstrap, f.join = len(nc.Join) == 0, strings.Join(nc.Join, ",")
	logger, err := f.logs.logger(nc.Logs)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(f, logger.With("node", nc.ID))
	if err != nil {
		return nil, err
	}
	return benchNode{srv}, nil
}

// benchNode is a runningServer as the bench sees it.
type benchNode struct{ s *runningServer }

func (n benchNode) URL() string     { return n.s.advertise }
func (n benchNode) IsLeader() bool  { return n.s.node.IsLeader() }
func (n benchNode) Shutdown() error { return n.s.shutdown() }
