package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/workron/workron/worker"
)

// devIgnores are the server flags dev does not take: it always bootstraps
// a one-node cluster of its own, and the test hooks are the chaos
// harness's.
var devIgnores = map[string]bool{"bootstrap": true, "peers": true, "join": true, "raft-fsync-delay": true, "clock-offset": true}

// devDefaults are dev's own defaults for server flags.
var devDefaults = map[string]string{
	"id": "dev", "http": "127.0.0.1:7070", "raft": "127.0.0.1:0", "data": "workron-data",
	"raft-heartbeat-timeout": "100ms", "raft-election-timeout": "100ms",
}

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
	// The server's flags that dev takes, with dev's defaults, so that -h
	// shows what dev does.
	all := flag.NewFlagSet("server", flag.ContinueOnError)
	sf.register(all)
	all.VisitAll(func(f *flag.Flag) {
		if devIgnores[f.Name] {
			return
		}
		if v, ok := devDefaults[f.Name]; ok {
			_ = f.Value.Set(v)
		}
		fs.Var(f.Value, f.Name, f.Usage)
	})
	fs.IntVar(&concurrency, "concurrency", 4, "in-process worker slots")
	fs.StringVar(&queues, "queues", "default", "queues the in-process worker serves")
	fs.Var(&passEnv, "pass-env", passEnvUsage)
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
	wcfg := wf.config(logger) // worker.New adds component=worker
	wcfg.ID = "dev-worker"
	wcfg.Tracer = srv.n.Tracer() // the node's spans and exporter
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
	fmt.Fprintf(stdout, "try: curl -X POST %s/jobs -H 'Content-Type: application/json' -d '{\"command\":\"echo hello\"}'\n", srv.advertise)
	werr := w.Run(ctx)
	serr := srv.shutdown()
	if werr != nil {
		return werr
	}
	return serr
}
