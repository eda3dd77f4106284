package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/telemetry"
	"github.com/workron/workron/worker"
)

// workerFlags are everything `workron worker` takes.
type workerFlags struct {
	servers, id, queues, tags  string
	concurrency                int
	grace, killGrace, wait     time.Duration
	vramMB, memoryMB, cpuMilli int
	execAddr                   string
	passEnv, allowCommands     listFlag
	runAs                      string
	otlpEndpoint               string
	logs                       logFlags
	sec                        clientSecurity
}

func (f *workerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.servers, "server", envOr("WORKRON_SERVER", defaultServers), "scheduler node URLs, comma-separated, tried in order (env WORKRON_SERVER)")
	fs.StringVar(&f.id, "id", "", "worker id (default HOSTNAME-PID)")
	fs.StringVar(&f.queues, "queues", "default", "queues to serve, in order of preference")
	fs.StringVar(&f.tags, "tags", "", "tags this worker offers, comma-separated")
	fs.IntVar(&f.concurrency, "concurrency", 4, "jobs run at once")
	fs.DurationVar(&f.grace, "grace", 30*time.Second, "on SIGTERM, how long running jobs may finish before they are killed")
	fs.DurationVar(&f.killGrace, "kill-grace", 5*time.Second, "pause between SIGTERM and SIGKILL when a job is stopped")
	fs.DurationVar(&f.wait, "poll-wait", 30*time.Second, "long-poll wait per claim")
	fs.IntVar(&f.vramMB, "vram-mb", 0, "VRAM this worker offers, in MB")
	fs.IntVar(&f.memoryMB, "memory-mb", 0, "memory this worker offers, in MB")
	fs.IntVar(&f.cpuMilli, "cpu-millis", 0, "CPU this worker offers, in thousandths of a core (e.g. 4000 for 4 cores)")
	fs.StringVar(&f.execAddr, "exec-addr", "", "address peers of a gang reach this worker at")
	fs.Var(&f.passEnv, "pass-env", passEnvUsage)
	fs.StringVar(&f.runAs, "run-as", "", "`USER` (name or uid) that jobs run as; the worker must run as root")
	fs.Var(&f.allowCommands, "allow-command", "the only programs (`PROG,...`, names or absolute paths) a job's command may run, split into words without a shell; "+
		"comma-separated, repeatable; with none, any command runs with sh -c")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", otlpUsage)
	f.logs.register(fs)
	f.sec.register(fs, "token-file")
}

// otlpUsage explains --otlp-endpoint.
const otlpUsage = "base `URL` of an OTLP/HTTP collector to send traces to, e.g. http://127.0.0.1:4318 " +
	"(default: the OTEL_EXPORTER_OTLP_ENDPOINT variable; with neither, no spans are recorded)"

func (f *workerFlags) config(logger *slog.Logger) worker.Config {
	cfg := worker.DefaultConfig()
	cfg.Servers = splitList(f.servers)
	if f.id != "" {
		cfg.ID = f.id
	}
	cfg.Queues = splitList(f.queues)
	cfg.Tags = splitList(f.tags)
	cfg.Concurrency = f.concurrency
	cfg.Grace, cfg.KillGrace, cfg.PollWait = f.grace, f.killGrace, f.wait
	cfg.Resources = wire.Resources{VRAMMB: f.vramMB, MemoryMB: f.memoryMB, CPUMillis: f.cpuMilli, Slots: f.concurrency}
	cfg.ExecAddr = f.execAddr
	cfg.PassEnv, cfg.AllowCommands, cfg.RunAs = f.passEnv, f.allowCommands, f.runAs
	if exe, err := os.Executable(); err == nil {
		cfg.StepCLI = exe // shell jobs' `workron step` is this binary
	}
	cfg.Logger = logger
	return cfg
}

func runWorker(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f workerFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, err := f.logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg := f.config(logger)
	if cfg.Client, err = f.sec.newClient(cfg.Servers, logger); err != nil {
		return err
	}
	defer cfg.Client.Close()
	traces, err := telemetry.New(ctx, telemetry.Config{Endpoint: f.otlpEndpoint, ServiceName: "workron-worker", InstanceID: cfg.ID})
	if err != nil {
		return err
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), telemetry.ShutdownTimeout)
		defer cancel()
		if err := traces.Shutdown(tctx); err != nil {
			logger.Warn("traces", "err", err)
		}
	}()
	if traces.Recording() {
		cfg.Tracer = traces
	}
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	logger.Info("worker starting", "servers", f.servers, "concurrency", f.concurrency, "queues", f.queues)
	return w.Run(ctx)
}

// passEnvUsage explains --pass-env.
var passEnvUsage = "variables (`NAME,...`) of the worker's environment that jobs get besides " +
	strings.Join(worker.BaseEnv(), ", ") + "; comma-separated, repeatable (e.g. LD_LIBRARY_PATH)"

// listFlag is a flag that takes comma-separated values and may be
// repeated; the values add up.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
