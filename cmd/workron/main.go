// Command workron is the whole of Workron in one binary: cluster node
// (server), worker, single-process dev mode, and client verbs. It parses
// flags and environment into the packages' Configs; the logic lives there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `workron: a distributed job scheduler in one binary.

Usage:
  workron server --id ID --http ADDR --raft ADDR --data DIR [--bootstrap | --peers id=addr,... | --join URL]
  workron worker [--server URL,...] [--id ID] [--concurrency N] [--queues a,b]
  workron dev    [--http 127.0.0.1:7070] [--data ./workron-data] [--concurrency 4]

  workron submit [flags] -- COMMAND [ARG...]   submit a shell job (--wait follows it)
  workron submit --batch FILE|-            submit the jobs of a file in one request
  workron jobs ls [--status S] [--queue Q] [--metadata K=V]... [--limit N]
  workron jobs get ID | cancel ID | retry ID [--no-cascade] | wait ID [--timeout D] | signal ID NAME [PAYLOAD]
  workron jobs cancel|retry|delete|priority --status S --queue Q --metadata K=V [--yes]   (bulk)
  workron jobs bulk ls | get ID | stop ID
  workron gangs get ID                     show a gang and its tasks
  workron workers [--limit N] [--cursor C] list workers (every page without --limit)
  workron queues [get NAME | pause NAME | resume NAME | limit NAME [--concurrency N --rate 100/s ... | --clear]]
  workron queues pauses | lift NAME [--key KEY]   (rate-limit pauses: list them, end them early)
  workron schedules ls | get NAME | delete NAME | pause NAME | resume NAME | trigger NAME
  workron schedules create|update NAME --cron EXPR [--timezone TZ] [--overlap allow|skip|queue]
                    [--catchup none|one|all] [job flags] -- COMMAND...   (or --file SCHEDULE.json)
  workron cluster status | health [--ready] | join --id ID --raft ADDR --http URL | remove ID
  workron step NAME -- COMMAND [ARG...]    in a shell job: run COMMAND once per job, replay its output after
  workron sleep NAME DURATION | wait-event NAME EVENT KEY [--timeout D] | wait-signal NAME SIGNAL
          | invoke NAME JOB-JSON           in a shell job: park it durably (it runs again from the top)
  workron events send NAME KEY [PAYLOAD]   send an event to the jobs waiting for it
  workron digest                           the answering node's state digest
  workron backup FILE                      download a consistent copy of the state
  workron restore FILE                     replace the running cluster's state with a backup
  workron restore --data DIR FILE          stage a backup in a new node's data dir (start it --bootstrap)
  workron store compact --data DIR         give a stopped node's free state file pages back to the disk
  workron tls ca | node --id ID --hosts H,... | client --name NAME [--dir DIR]
                                           make a CA and node or client certificates
  workron version [-o json]                version, commit, Go version and protocol
  workron bench  [--short] [--server URL,...] [--scenarios a,b] [-o json]
                                           measure throughput and latency

Client verbs and workers take --server (or WORKRON_SERVER); by default they try
the dev node (127.0.0.1:7070), then the local cluster (127.0.0.1:7001-7003).
Client verbs take -o json. Run "workron COMMAND -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr); code != 0 {
		stop()
		os.Exit(code)
	}
}

// exitCode is the process's exit code for run's error, which it prints to
// stderr unless the error is an exitError (already explained) or a request
// for help (the usage is already printed).
func exitCode(err error, stderr io.Writer) int {
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	fmt.Fprintln(stderr, "workron:", escapeControls(err.Error()))
	return 1
}

// exitError ends the process with a given code and no further message.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// defaultServers are the nodes client verbs and workers try, in order, when
// neither --server nor WORKRON_SERVER names any: the dev node
// (`workron dev`) and the three nodes of `scripts/cluster.sh up`, so both
// quick starts work without flags. A node that refuses the connection is
// skipped at once.
const defaultServers = "http://127.0.0.1:7070,http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003"

// run dispatches a subcommand; tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: 2}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "server":
		return runServer(ctx, rest, stderr)
	case "worker":
		return runWorker(ctx, rest, stderr)
	case "dev":
		return runDev(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "submit", "jobs", "workers", "queues", "cluster", "schedules", "gangs", "digest", "events":
		return runClient(ctx, cmd, rest, stdout, stderr)
	case "step":
		return runStep(ctx, rest, os.Stdin, stdout, stderr)
	case "sleep", "wait-event", "wait-signal", "invoke":
		return runPark(ctx, cmd, rest, stdout, stderr)
	case "backup":
		return runBackup(ctx, rest, stdout, stderr)
	case "restore":
		return runRestore(ctx, rest, stdout, stderr)
	case "tls":
		return runTLS(rest, stdout, stderr)
	case "store":
		return runStore(rest, stdout, stderr)
	case "version", "--version":
		return runVersion(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "workron: unknown command %q\n\n%s", cmd, usage)
	return &exitError{code: 2}
}

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", l.format)
}

// splitList splits "a,b,,c" into [a b c].
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
