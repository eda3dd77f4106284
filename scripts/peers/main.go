// Command peers-bench measures Workron's peers, River (PostgreSQL) and asynq
// (Redis), with the shapes of `workron bench`, and prints the comparison
// table. It is its own module so that the main module never depends on them;
// scripts/bench-peers builds it, starts PostgreSQL and Redis on 127.0.0.1 and
// runs it.
//
//	peers-bench river --pg postgres://... [flags]     JSON lines of River's figures
//	peers-bench asynq --redis 127.0.0.1:PORT [flags]  the same for asynq
//	peers-bench table NAME=FILE ...                   the table of ratios (Workron first)
//
// It never connects anywhere but the addresses it is given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/workron/workron/scripts/peers/shapes"
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
		return shapes.RunTable(args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q: want river, asynq or table", args[0])
}

// peerFlags are the shapes' flags and each peer's own.
type peerFlags struct {
	shapes.Flags
	label         string
	pg            string
	redis         string
	riverCooldown time.Duration
	asynqCheck    time.Duration
}

func (f *peerFlags) register(fs *flag.FlagSet) {
	f.Flags.Register(fs)
	fs.StringVar(&f.label, "label", "", "the system's name in the figures (default: River, or asynq with Redis's appendfsync)")
	fs.StringVar(&f.pg, "pg", "", "PostgreSQL URL (river)")
	fs.StringVar(&f.redis, "redis", "", "Redis address host:port (asynq)")
	fs.DurationVar(&f.riverCooldown, "river-fetch-cooldown", time.Millisecond, "River's FetchCooldown (River's default is 100ms; its docs: throughput is limited by this value)")
	fs.DurationVar(&f.asynqCheck, "asynq-check-interval", time.Millisecond, "asynq's TaskCheckInterval, the pause when every queue is empty (asynq's default is 1s)")
}

func (f *peerFlags) validate(set map[string]bool) error {
	switch {
	case f.riverCooldown < time.Millisecond:
		return fmt.Errorf("--river-fetch-cooldown must be at least 1ms, got %s", f.riverCooldown)
	case f.asynqCheck <= 0:
		return fmt.Errorf("--asynq-check-interval must be positive, got %s", f.asynqCheck)
	}
	return f.Flags.Validate(set)
}

func runPeer(ctx context.Context, system string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(system, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f peerFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := f.validate(set); err != nil {
		return err
	}
	var p shapes.Peer
	var err error
	switch system {
	case "river":
		p, err = newRiverPeer(ctx, f, stderr)
	default:
		p, err = newAsynqPeer(ctx, f)
	}
	if err != nil {
		return err
	}
	defer p.Close()
	return shapes.Run(ctx, p, f.Flags, stdout, stderr)
}
