//go:build unix

// Command hostile runs Workron's hostile-load suite (package
// internal/tools/hostile): a real three-node cluster with tokens, each attack
// of issue #28 against it, and a table of what each cost.
//
//	go run ./internal/tools/hostile/cmd/hostile --short          # smaller attacks, as CI runs them
//	go run ./internal/tools/hostile/cmd/hostile                  # the full sizes; fails on an election or a slow /health too
//	go run ./internal/tools/hostile/cmd/hostile --attacks cascade,worker_ids
//
// It exits 1 when a check fails and keeps the run's directory (the nodes'
// logs) for a post-mortem.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/workron/workron/internal/tools/hostile"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		cfg     hostile.Config
		attacks string
		asJSON  bool
		keep    bool
	)
	flag.BoolVar(&cfg.Short, "short", false, "CI mode: smaller attacks (the floods keep their parallelism); checks memory, refusals and lost jobs, reports terms and latency")
	flag.IntVar(&cfg.Parallel, "parallel", 200, "requests a flood sends at once")
	flag.StringVar(&attacks, "attacks", "", "comma-separated attacks (default all): "+strings.Join(hostile.Names(), ","))
	flag.StringVar(&cfg.Dir, "dir", "", "directory for data and logs (default: a temporary one, removed after a clean run)")
	flag.StringVar(&cfg.Bin, "bin", "", "workron binary to run (default: build ./cmd/workron)")
	flag.BoolVar(&asJSON, "json", false, "print the report as JSON")
	flag.BoolVar(&keep, "keep", false, "keep the directory after a clean run")
	strict := flag.Bool("strict", true, "fail an attack on an election or a /health p99 over 500ms (the default in the long mode; --short sets it false)")
	flag.Parse()
	cfg.Strict = *strict && !cfg.Short
	if attacks != "" {
		cfg.Attacks = strings.Split(attacks, ",")
	}
	cfg.Log = os.Stderr
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "workron-hostile-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostile:", err)
			return 2
		}
		cfg.Dir = d
	}
	if cfg.Bin == "" {
		cfg.Bin = filepath.Join(cfg.Dir, "workron")
		if out, err := exec.Command("go", "build", "-o", cfg.Bin, "./cmd/workron").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "hostile: go build ./cmd/workron: %v\n%s", err, out)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := hostile.Run(ctx, cfg)
	if rep != nil {
		if asJSON {
			json.NewEncoder(os.Stdout).Encode(rep)
		} else {
			hostile.PrintTable(os.Stdout, rep)
		}
	}
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "hostile: %v (directory kept: %s)\n", err, cfg.Dir)
		return 2
	case rep.Failed():
		fmt.Fprintf(os.Stderr, "hostile: FAILED after %v (directory kept: %s)\n", time.Since(start).Round(time.Second), cfg.Dir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "hostile: every check held, %v\n", time.Since(start).Round(time.Second))
	if !keep {
		os.RemoveAll(cfg.Dir)
	}
	return 0
}
