package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// Config configures a Worker. Start from DefaultConfig.
type Config struct {
	// Servers are the base URLs of the scheduler nodes, like
	// "http://127.0.0.1:7001". Required unless Client is set.
	Servers []string

	// ID names the worker to the cluster; it must be unique among running
	// workers. Defaults to "<hostname>-<pid>".
	ID string

	// Concurrency is how many jobs run at once. Defaults to 4; 1 to 4096.
	Concurrency int

	// Queues are the queues served, in order of preference. Defaults to
	// ["default"].
	Queues []string

	// Shell says whether this worker runs shell-command jobs. Defaults to
	// true.
	Shell bool

	// PassEnv names variables of the worker's own environment that commands
	// get on top of BaseEnv (PATH, HOME, USER, LOGNAME, LANG, LC_ALL, TZ,
	// TMPDIR); nothing else of the worker's environment reaches a job. This
	// is how jobs get a loader variable such as LD_LIBRARY_PATH, which a
	// job's own env may not set. Names only, without '='; WORKRON_TOKEN is
	// refused. Defaults to none.
	PassEnv []string

	// RunAs is the user (a name or a numeric uid) commands run as, with
	// that user's primary and supplementary groups, HOME, USER and LOGNAME,
	// starting in that user's home directory (or "/" when it does not
	// exist). It needs the worker to run as root; New refuses it otherwise.
	// Typed handlers run inside the worker and are not affected. Defaults to
	// "": commands run as the worker's user.
	RunAs string

	// StepCLI is the path of the workron binary whose verbs (workron step,
	// sleep, wait-event...) a shell job runs to speak to its step socket:
	// its directory goes first on the job's PATH, so that `workron` is
	// found, and is the binary of this worker's protocol, whatever the
	// host's PATH holds. `workron worker` sets it to itself. Defaults to
	// "": the job's PATH is left as it is.
	StepCLI string

	// AllowCommands, when not empty, lists the programs commands may run,
	// as bare names (looked up in the worker's PATH once, by New) or
	// absolute paths. A command is then run without a shell: it is split
	// into words (spaces and tabs separate, '...' and "..." quote), its
	// first word must be one of the list exactly as written, and a command
	// using any other shell syntax (| & ; < > ( ) $ ` \ * ? [ # ~ { } !,
	// newlines, and $ ` \ within double quotes) is refused. A refused job
	// fails without retry. Defaults to none: any command runs with sh -c.
	AllowCommands []string

	// Grace is how long running jobs may go on after shutdown starts before
	// they are stopped. Defaults to 30s; must not be negative.
	Grace time.Duration

	// KillGrace is the pause between SIGTERM and SIGKILL when a command is
	// stopped. Defaults to 5s; must not be negative.
	KillGrace time.Duration

	// OutputTail is how many bytes of a command's combined output are kept
	// and reported: the last ones. Defaults to 4096; 0 to 1 MiB.
	OutputTail int

	// PollWait is how long one claim may wait on the server for work.
	// Defaults to 30s; 10ms to 5m.
	PollWait time.Duration

	// ProgressInterval is the least time between two progress sends: a
	// job's new progress goes to the cluster at once (in a worker
	// heartbeat that lists only the jobs with new progress) unless one went
	// less than ProgressInterval ago, and then when it has passed, carrying
	// the latest update of every job. Defaults to 1s; 100ms to 1m.
	ProgressInterval time.Duration

	// Resources, Tags and ExecAddr are announced at registration.
	Resources wire.Resources
	Tags      []string
	ExecAddr  string

	// Logger receives the worker's logs. When nil, nothing is logged.
	Logger *slog.Logger

	// Tracer, when set, records a "run" span per attempt, the child of the
	// job's trace (see traceRun); a handler's context carries it. Nil
	// records none, and jobs still get their trace's TRACEPARENT.
	Tracer trace.TracerProvider

	// Client talks to the cluster. When nil, New builds one for Servers and
	// Run closes its idle connections when it returns.
	Client *client.Client
}

// DefaultConfig returns a Config with every default filled in and no
// Servers.
func DefaultConfig() Config {
	return Config{
		ID:               defaultID(),
		Concurrency:      4,
		Queues:           []string{"default"},
		Shell:            true,
		Grace:            30 * time.Second,
		KillGrace:        5 * time.Second,
		OutputTail:       4096,
		PollWait:         30 * time.Second,
		ProgressInterval: time.Second,
		Logger:           slog.New(slog.DiscardHandler),
	}
}

// Limits checked by Validate.
const (
	maxConcurrency = 4096
	maxOutputTail  = 1 << 20
	minPollWait    = 10 * time.Millisecond
	maxPollWait    = 5 * time.Minute
	minProgressInt = 100 * time.Millisecond
	maxProgressInt = time.Minute
)

// Validate reports the first field that is out of bounds, naming it and the
// bound.
func (c Config) Validate() error {
	switch {
	case c.Client == nil && len(c.Servers) == 0:
		return errors.New("worker: Config.Servers must list at least one URL when Config.Client is nil")
	case c.ID == "":
		return errors.New("worker: Config.ID must not be empty")
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return fmt.Errorf("worker: Config.Concurrency must be between 1 and %d, got %d", maxConcurrency, c.Concurrency)
	case len(c.Queues) == 0:
		return errors.New("worker: Config.Queues must list at least one queue")
	case len(c.Queues) > wire.MaxQueues:
		return fmt.Errorf("worker: Config.Queues must list at most %d queues (the server's limit), got %d", wire.MaxQueues, len(c.Queues))
	case c.Grace < 0:
		return fmt.Errorf("worker: Config.Grace must not be negative, got %s", c.Grace)
	case c.KillGrace < 0:
		return fmt.Errorf("worker: Config.KillGrace must not be negative, got %s", c.KillGrace)
	case c.OutputTail < 0 || c.OutputTail > maxOutputTail:
		return fmt.Errorf("worker: Config.OutputTail must be between 0 and %d bytes, got %d", maxOutputTail, c.OutputTail)
	case c.PollWait < minPollWait || c.PollWait > maxPollWait:
		return fmt.Errorf("worker: Config.PollWait must be between %s and %s, got %s", minPollWait, maxPollWait, c.PollWait)
	case c.ProgressInterval < minProgressInt || c.ProgressInterval > maxProgressInt:
		return fmt.Errorf("worker: Config.ProgressInterval must be between %s and %s, got %s", minProgressInt, maxProgressInt, c.ProgressInterval)
	}
	if err := checkPassEnv(c.PassEnv); err != nil {
		return err
	}
	for i, q := range c.Queues {
		if q == "" {
			return fmt.Errorf("worker: Config.Queues[%d] must not be empty", i)
		}
	}
	return nil
}

func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}
