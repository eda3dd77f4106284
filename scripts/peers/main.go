// Command peers-bench measures Workron's peers, River (PostgreSQL) and asynq
// (Redis), with the shapes of `workron bench`, and prints the comparison
// table. It is its own module so that the main module never depends on them;
// scripts/bench-peers builds it, starts PostgreSQL and Redis on 127.0.0.1 and
// runs it.
//
//	peers-bench river --pg postgres://... [flags]   JSON lines of River's figures
//	peers-bench asynq --redis 127.0.0.1:PORT [flags]  the same for asynq
//	peers-bench table NAME=FILE ...               the table of ratios (Workron first)
//
// It never connects anywhere but the addresses it is given.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers-bench:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: peers-bench river|asynq|table [flags]")
	}
	switch args[0] {
	case "river", "asynq":
		return runPeer(ctx, args[0], args[1:], stdout, stderr)
	case "table":
		return runTable(args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q: want river, asynq or table", args[0])
}

// shapeFlags are the flags shared with `workron bench`, with its meanings.
type shapeFlags struct {
	short     bool
	clients   int
	jobs      int
	rate      float64
	duration  time.Duration
	scenarios string
	label     string
	pg        string
	redis     string

	riverCooldown time.Duration
	asynqCheck    time.Duration
}

func (f *shapeFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.short, "short", false, "quick correctness run: --jobs 2000 and --duration 3s unless given")
	fs.IntVar(&f.clients, "clients", 64, "concurrent single-job submitters, and workers of claim_done")
	fs.IntVar(&f.jobs, "jobs", 20000, "jobs of submit_single and of claim_done; submit_batch sends twice as many")
	fs.Float64Var(&f.rate, "rate", 200, "submissions per second in the latency scenario")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long the latency scenario submits")
	fs.StringVar(&f.scenarios, "scenarios", strings.Join(peerScenarios, ","), "scenarios to run, comma-separated")
	fs.StringVar(&f.label, "label", "", "the system's name in the figures (default: river, or asynq with Redis's appendfsync)")
	fs.StringVar(&f.pg, "pg", "", "PostgreSQL URL (river)")
	fs.StringVar(&f.redis, "redis", "", "Redis address host:port (asynq)")
	fs.DurationVar(&f.riverCooldown, "river-fetch-cooldown", time.Millisecond, "River's FetchCooldown (River's default is 100ms; its docs: throughput is limited by this value)")
	fs.DurationVar(&f.asynqCheck, "asynq-check-interval", time.Millisecond, "asynq's TaskCheckInterval, the pause when every queue is empty (asynq's default is 1s)")
}

func (f *shapeFlags) validate(set map[string]bool) error {
	if f.short {
		if !set["jobs"] {
			f.jobs = 2000
		}
		if !set["duration"] {
			f.duration = 3 * time.Second
		}
	}
	switch {
	case f.clients < 1:
		return fmt.Errorf("--clients must be at least 1, got %d", f.clients)
	case f.jobs < 1:
		return fmt.Errorf("--jobs must be at least 1, got %d", f.jobs)
	case f.rate <= 0 || math.IsInf(f.rate, 0) || math.IsNaN(f.rate):
		return fmt.Errorf("--rate must be a positive number, got %v", f.rate)
	case f.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %s", f.duration)
	case f.riverCooldown < time.Millisecond:
		return fmt.Errorf("--river-fetch-cooldown must be at least 1ms, got %s", f.riverCooldown)
	case f.asynqCheck <= 0:
		return fmt.Errorf("--asynq-check-interval must be positive, got %s", f.asynqCheck)
	}
	for _, s := range splitList(f.scenarios) {
		if !slices.Contains(peerScenarios, s) {
			return fmt.Errorf("--scenarios: unknown scenario %q (known: %s)", s, strings.Join(peerScenarios, ", "))
		}
	}
	return nil
}

// figure is one measured number, one JSON line: the fields `workron bench
// -o json` prints, less the Raft counters, plus the system.
type figure struct {
	System   string  `json:"system,omitempty"`
	Settings string  `json:"settings,omitempty"` // durability and tuning in force
	Figure   string  `json:"figure"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Jobs     int     `json:"jobs"`
	Seconds  float64 `json:"seconds"`
	Clients  int     `json:"clients,omitempty"`
	Errors   int64   `json:"errors"`
	CPUCores float64 `json:"cpu_cores"`
	Load1    float64 `json:"load1,omitempty"`
	Correct  bool    `json:"correct"`
	Problems string  `json:"problems,omitempty"`
	Note     string  `json:"note,omitempty"`
}

func runPeer(ctx context.Context, system string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(system, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f shapeFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := f.validate(set); err != nil {
		return err
	}
	var p peer
	var err error
	switch system {
	case "river":
		p, err = newRiverPeer(ctx, f, stderr)
	default:
		p, err = newAsynqPeer(ctx, f, stderr)
	}
	if err != nil {
		return err
	}
	defer p.close()
	r := &runner{f: f, p: p, stderr: stderr, runID: strconv.FormatInt(time.Now().UnixMilli()%1e9, 36)}
	fmt.Fprintf(stderr, "peers-bench: %s (%s), load average %.1f\n", p.label(), p.settings(), loadAverage())
	var figs []figure
	for _, s := range splitList(f.scenarios) {
		fmt.Fprintf(stderr, "peers-bench: %s %s\n", p.label(), s)
		got, err := r.run(ctx, s)
		if err != nil {
			return fmt.Errorf("%s %s: %w", p.label(), s, err)
		}
		figs = append(figs, got...)
	}
	enc := json.NewEncoder(stdout)
	var bad []string
	for _, fg := range figs {
		fg.System, fg.Settings = p.label(), p.settings()
		_ = enc.Encode(fg)
		if !fg.Correct {
			bad = append(bad, fg.Figure+": "+fg.Problems)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: correctness check failed: %s", p.label(), strings.Join(bad, "; "))
	}
	return nil
}

// loadAverage is the host's one-minute load average (0 where unknown).
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(data), " ")
	v, _ := strconv.ParseFloat(first, 64)
	return v
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
