//go:build unix

// Command chaosworker serves the durable jobs of a chaos run (see
// internal/tools/chaos, durable.go): the chaos harness starts, SIGKILLs and
// restarts it like a real worker, and it appends what each step did to the
// run's ledger.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/workron/workron/internal/tools/chaos"
)

func main() {
	var cfg chaos.DurableWorkerConfig
	var servers string
	flag.StringVar(&servers, "server", "", "comma-separated node URLs")
	flag.StringVar(&cfg.ID, "id", "", "worker id")
	flag.StringVar(&cfg.Ledger, "ledger", "", "ledger file to append to")
	flag.IntVar(&cfg.Concurrency, "concurrency", 4, "jobs at once")
	flag.BoolVar(&cfg.PlantRerun, "plant-rerun", false, "plant a fault: run the first step again, without the journal, after the first attempt")
	flag.Parse()
	if servers == "" || cfg.ID == "" || cfg.Ledger == "" {
		fmt.Fprintln(os.Stderr, "chaosworker: --server, --id and --ledger are required")
		os.Exit(2)
	}
	cfg.Servers, cfg.Log = strings.Split(servers, ","), os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := chaos.RunDurableWorker(ctx, cfg); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "chaosworker:", err)
		os.Exit(1)
	}
}
