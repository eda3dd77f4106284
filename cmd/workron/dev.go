package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/workron/workron/worker"
)

// runDev runs one node that bootstraps its own cluster and a worker in the
// same process: the quickest way to try Workron.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		sf          serverFlags
		concurrency int
		queues      string
		passEnv     listFlag
	)
	sf.register(fs)
	fs.IntVar(&concurrency, "concurrency", 4, "in-process worker slots")
	fs.StringVar(&queues, "queues", "default", "queues the in-process worker serves")
	fs.Var(&passEnv, "pass-env", passEnvUsage)
	// dev's own defaults.
	_ = fs.Set("id", "dev")
	_ = fs.Set("http", "127.0.0.1:7070")
	_ = fs.Set("raft", "127.0.0.1:0")
	_ = fs.Set("data", "workron-data")
	_ = fs.Set("raft-heartbeat-timeout", "100ms")
	_ = fs.Set("raft-election-timeout", "100ms")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sf.bootstrap, sf.peers, sf.join = true, "", ""
	logger, err := sf.logs.logger(stderr)
	if err != nil {
		return err
	}
	srv, err := startServer(sf, logger)
	if err != nil {
		return err
	}
	wf := workerFlags{servers: srv.advertise, queues: queues, concurrency: concurrency,
		grace: 30 * time.Second, killGrace: 5 * time.Second, wait: 30 * time.Second, passEnv: passEnv}
	wcfg := wf.config(logger.With("component", "worker"))
	wcfg.ID = "dev-worker"
	if wcfg.Client, err = sf.sec.selfClient(srv.advertise, wcfg.Logger); err != nil {
		srv.shutdown()
		return err
	}
	w, err := worker.New(wcfg)
	if err != nil {
		srv.shutdown()
		return err
	}
	fmt.Fprintf(stdout, "workron dev: API on %s, data in %s, %d worker slots. Ctrl-C stops.\n", srv.advertise, sf.dataDir, concurrency)
	fmt.Fprintf(stdout, "try: curl -X POST %s/jobs -d '{\"command\":\"echo hello\"}'\n", srv.advertise)
	werr := w.Run(ctx)
	serr := srv.shutdown()
	if werr != nil {
		return werr
	}
	return serr
}
