package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/traceparent"
	"github.com/workron/workron/worker/client"
)

// cliFlags are the flags every client verb takes.
type cliFlags struct {
	server string
	output string
	stale  bool
	sec    clientSecurity
}

func (c *cliFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", envOr("WORKRON_SERVER", defaultServers), "node URLs, comma-separated, tried in order (env WORKRON_SERVER)")
	fs.StringVar(&c.output, "o", "table", "output: table or json")
	fs.BoolVar(&c.stale, "stale", false, "read the node's state as it is (?stale=1), without waiting for the leader's latest writes")
	c.sec.register(fs, "token")
}

// cli is one client verb's context.
type cli struct {
	flags  cliFlags
	client *client.Client
	out    io.Writer     // human-readable output, through escapeControls
	errOut io.Writer     // progress and warnings, through escapeControls
	stdout io.Writer     // -o json's, as it is
	stderr io.Writer     // the progress bar's, which escapes its own text
	poll   time.Duration // how often wait asks for the job
}

func runClient(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &cli{out: escaping{stdout}, errOut: escaping{stderr}, stdout: stdout, stderr: stderr, poll: 200 * time.Millisecond}
	c.flags.register(fs)
	switch verb {
	case "submit":
		return c.submit(ctx, fs, args)
	case "jobs":
		return c.jobs(ctx, fs, args)
	case "workers":
		return c.workers(ctx, fs, args)
	case "queues":
		return c.queues(ctx, fs, args)
	case "cluster":
		return c.cluster(ctx, fs, args)
	case "schedules":
		return c.schedules(ctx, fs, args)
	case "gangs":
		return c.gangs(ctx, fs, args)
	case "digest":
		return c.digest(ctx, fs, args)
	case "events":
		return c.events(ctx, fs, args)
	}
	return fmt.Errorf("unknown command %q", verb)
}

func (c *cli) connect() error {
	if c.flags.output != "table" && c.flags.output != "json" {
		return fmt.Errorf("-o: %q is not table or json", c.flags.output)
	}
	cl, err := c.flags.sec.newClient(splitList(c.flags.server), nil, func(cfg *client.Config) { cfg.StaleReads = c.flags.stale })
	if err != nil {
		return err
	}
	c.client = cl
	return nil
}

// parse parses flags that may come before or after positional arguments.
// Everything after "--" is positional, flags or not (`submit -- sh -c 'exit
// 3'`).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// flag.Parse stops after a "--" it meets where a flag could be, and
		// drops it; one met after a positional argument is still in rest.
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c *cli) submit(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var (
		req                   wire.SubmitRequest
		jf                    jobFlags
		depends, batch, runAt string
		wait                  bool
		timeout               time.Duration
	)
	jf.register(fs, &req, "")
	fs.StringVar(&depends, "depends-on", "", "job ids this job waits for, comma-separated")
	fs.StringVar(&req.Delay, "delay", "", "run after this delay, e.g. 5m")
	fs.StringVar(&runAt, "run-at", "", "run at this time (RFC 3339, e.g. 2026-01-02T15:04:05Z)")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "submit at most once per key")
	fs.StringVar(&req.UniqueFor, "unique-for", "", "with --idempotency-key: how long the key stays taken, e.g. 1h (default: as long as the job is kept)")
	fs.BoolVar(&wait, "wait", false, "wait until the job finishes, showing its progress, and exit with its exit code")
	fs.DurationVar(&timeout, "wait-timeout", 0, "with --wait: give up waiting after this long, e.g. 10m (default: no limit)")
	fs.IntVar(&req.GangSize, "gang-size", 0, "run as a gang of this many tasks, placed and started all at once")
	fs.StringVar(&batch, "batch", "", "submit the jobs of this `FILE` (- for stdin) in one request: the body of POST /jobs/batch or a JSON array of jobs")
	fs.StringVar(&req.ConcurrencyKey, "concurrency-key", "", "the job's key for its queue's per-key limits (a tenant, a customer)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if batch != "" {
		if len(pos) > 0 || wait {
			return errors.New("submit: --batch takes its jobs from the file; give no command and no --wait")
		}
		return c.submitBatch(ctx, batch)
	}
	if err := jf.fill(&req, pos, "submit", false); err != nil {
		return err
	}
	if runAt != "" {
		t, err := time.Parse(time.RFC3339, runAt)
		if err != nil {
			return fmt.Errorf("--run-at: %q is not an RFC 3339 time like 2026-01-02T15:04:05Z", runAt)
		}
		req.RunAt = &t
	}
	req.DependsOn = splitList(depends)
	if err := c.connect(); err != nil {
		return err
	}
	if req.GangSize != 0 {
		if wait {
			return errors.New("submit: --wait does not go with --gang-size; wait for its tasks with workron jobs wait")
		}
		g, err := c.client.SubmitGang(ctx, req)
		if err != nil {
			return err
		}
		c.warn(g.Warnings)
		return c.print(g, func() { fmt.Fprintf(c.out, "%s: %s\n", g.GangID, strings.Join(g.Tasks, " ")) })
	}
	job, err := c.client.Submit(ctx, req)
	if err != nil {
		return err
	}
	c.warn(job.Warnings)
	if wait {
		fmt.Fprintln(c.errOut, job.ID)
		return c.wait(ctx, job.ID, timeout)
	}
	return c.print(job, func() { fmt.Fprintln(c.out, job.ID) })
}

// submitBatch submits the jobs of a file (POST /jobs/batch) and prints
// their ids, one a line. The file's JSON goes as it is, so that the server
// can warn about fields it does not know.
func (c *cli) submitBatch(ctx context.Context, file string) error {
	data, err := readInput(file)
	if err != nil {
		return fmt.Errorf("--batch: %w", err)
	}
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("[")) {
		data = slices.Concat([]byte(`{"jobs":`), trimmed, []byte("}"))
	}
	if !json.Valid(data) {
		return fmt.Errorf("--batch %s: not a JSON document", file)
	}
	if err := c.connect(); err != nil {
		return err
	}
	resp, err := c.client.Do(ctx, client.Request{Method: "POST", Path: "/jobs/batch", JSON: data})
	if err != nil {
		return fmt.Errorf("submit batch: %w", err)
	}
	var list wire.JobList
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		return fmt.Errorf("submit batch: decode the reply: %w", err)
	}
	c.warn(list.Warnings)
	return c.print(list, func() {
		for _, j := range list.Jobs {
			fmt.Fprintln(c.out, j.ID)
		}
	})
}

// readInput reads a file, or stdin for "-".
func readInput(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(file)
}

// warn prints the server's warnings about a request (unknown fields) on
// stderr.
func (c *cli) warn(warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(c.errOut, "workron: warning: %s\n", w)
	}
}

const jobsUsage = `jobs: give one of
  ls [--filter EXPR] [--status S] [--queue Q] [--metadata K=V]... [--limit N] [--cursor C]
  count [--filter EXPR] [--status S] [--queue Q] [--metadata K=V]...
  get ID
  cancel ID [--no-cascade] | retry ID [--no-cascade]
  cancel|retry|delete|priority [--status S] [--queue Q] [--metadata K=V]... [--filter EXPR] [--priority P] [--yes] [--no-follow]
  bulk ls | bulk get ID | bulk stop ID
  wait ID [--timeout D]
  signal ID NAME [PAYLOAD]`

// jobs runs `workron jobs SUB ...`. Each subcommand has its own flags, so
// `workron jobs cancel -h` shows cancel's.
func (c *cli) jobs(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprintln(fs.Output(), jobsUsage)
			return flag.ErrHelp
		}
		return errors.New(jobsUsage)
	}
	sub, args := args[0], args[1:]
	fs.Init("jobs "+sub, flag.ContinueOnError)
	switch sub {
	case "ls", "list":
		return c.jobsList(ctx, fs, sub, args)
	case "count":
		return c.jobsCount(ctx, fs, args)
	case "signal":
		return c.jobsSignal(ctx, fs, args)
	}
	var (
		act     client.ActionOptions
		timeout time.Duration
		bulk    bulkFlags
	)
	switch sub {
	case "bulk":
		return c.bulkVerb(ctx, fs, args)
	case "delete", "priority":
		bulk.register(fs, sub)
	case "cancel", "retry":
		fs.BoolVar(&act.NoCascade, "no-cascade", false, "leave the jobs that depend on this one alone (?cascade=false)")
		bulk.register(fs, sub)
	case "wait":
		fs.DurationVar(&timeout, "timeout", 0, "give up after this long, e.g. 10m (default: no limit)")
	case "get":
	default:
		return fmt.Errorf("jobs: unknown subcommand %q\n%s", sub, jobsUsage)
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	if bulk.set() || sub == "delete" || sub == "priority" {
		if len(pos) > 0 {
			return fmt.Errorf("jobs %s: give a job id or filters, not both", sub)
		}
		return c.bulk(ctx, sub, &bulk)
	}
	if len(pos) != 1 {
		return fmt.Errorf("jobs %s: give exactly one job id", sub)
	}
	id := pos[0]
	var job *wire.Job
	switch sub {
	case "get":
		job, err = c.client.Get(ctx, id)
	case "cancel":
		job, err = c.client.CancelWith(ctx, id, act)
	case "retry":
		job, err = c.client.RetryWith(ctx, id, act)
	case "wait":
		return c.wait(ctx, id, timeout)
	}
	if err != nil {
		return err
	}
	return c.print(job, func() { c.printJob(job) })
}

func (c *cli) print(v any, table func()) error {
	if c.flags.output == "json" {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	table()
	return nil
}

func (c *cli) printJobs(list *wire.JobList) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tWAITING\tQUEUE\tPRIO\tATTEMPTS\tCREATED\tCOMMAND")
	for _, j := range list.Jobs {
		cmd := j.Command
		if cmd == "" {
			cmd = "type:" + j.Type
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\n", j.ID, j.Status, cmp.Or(j.WaitingCode, "-"), j.Queue, j.Priority, j.Attempts, j.MaxAttempts,
			j.CreatedAt.Local().Format(time.DateTime), truncate(cmd, 50))
	}
	tw.Flush()
	if list.NextCursor != "" {
		fmt.Fprintf(c.out, "more: --cursor %s\n", list.NextCursor)
	}
}

func (c *cli) printJob(j *wire.Job) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", j.ID)
	row("status", j.Status)
	row("waiting", j.Waiting)
	row("parked", parkedText(j.Parked)) // parkverbs.go
	row("command", j.Command)
	row("type", j.Type)
	row("queue", j.Queue)
	row("concurrency_key", j.ConcurrencyKey)
	row("priority", fmt.Sprint(j.Priority))
	row("attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts))
	row("depends_on", strings.Join(j.DependsOn, ","))
	row("schedule", j.Schedule)
	if j.ScheduledFor != nil {
		row("scheduled_for", j.ScheduledFor.Local().Format(time.DateTime))
	}
	row("worker", j.WorkerID)
	row("trace", traceparent.TraceID(j.TraceParent))
	row("progress", progressText(j.Progress))
	if j.ExitCode != nil {
		row("exit_code", fmt.Sprint(*j.ExitCode))
	}
	row("last_error", j.LastError)
	tw.Flush()
	c.printAttempts(j.AttemptHistory) // cli_show.go
	c.printJournal(j.Journal)
	if j.Output != "" {
		fmt.Fprintf(c.out, "output:\n%s", j.Output)
		if !strings.HasSuffix(j.Output, "\n") {
			fmt.Fprintln(c.out)
		}
	}
	printResult(c.out, j.Result)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// workers lists the workers (`workron workers`), or forgets an offline
// one (`workron workers rm ID`).
func (c *cli) workers(ctx context.Context, fs *flag.FlagSet, args []string) error {
	page := pageFlags(fs, "worker")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	remove := len(pos) == 2 && pos[0] == "rm"
	if len(pos) > 0 && !remove && (len(pos) != 1 || (pos[0] != "ls" && pos[0] != "list")) {
		return errors.New("workers: give ls or rm ID")
	}
	if err := c.connect(); err != nil {
		return err
	}
	if remove {
		return c.removeWorker(ctx, pos[1])
	}
	if onePage(page) {
		list, err := c.client.WorkerList(ctx, *page)
		if err != nil {
			return err
		}
		return c.print(list, func() { c.printWorkers(list.Workers); c.printMore(list.NextCursor) })
	}
	ws, err := c.client.Workers(ctx)
	if err != nil {
		return err
	}
	return c.print(wire.WorkerList{Workers: ws}, func() { c.printWorkers(ws) })
}

// pageFlags registers a list verb's --limit and --cursor; without them
// the verb lists every item (of what), a page of 1000 at a time.
func pageFlags(fs *flag.FlagSet, what string) *client.Page {
	p := new(client.Page)
	fs.IntVar(&p.Limit, "limit", 0, "at most this many (default: every "+what+", a page of 1000 at a time)")
	fs.StringVar(&p.Cursor, "cursor", "", "next_cursor of a previous page")
	return p
}

// onePage reports whether p asks for one page rather than every item.
func onePage(p *client.Page) bool { return p.Limit > 0 || p.Cursor != "" }

// printMore says how to ask for the next page, if there is one.
func (c *cli) printMore(next string) {
	if next != "" {
		fmt.Fprintf(c.out, "more: --cursor %s\n", next)
	}
}

// removeWorker forgets an offline worker that holds nothing (`workron
// workers rm ID`; the admin role).
func (c *cli) removeWorker(ctx context.Context, id string) error {
	if err := c.client.DeleteWorker(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "removed worker %s\n", id)
	return nil
}

func (c *cli) printWorkers(ws []wire.Worker) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tRUNNING\tSLOTS\tRESOURCES\tTAGS\tQUEUES\tLAST HEARTBEAT")
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", cell(w.ID), w.Status, w.RunningJobs, w.Resources.Slots, resourcesText(w.Resources),
			cell(strings.Join(w.Tags, ",")), cell(strings.Join(w.Queues, ",")), w.LastHeartbeat.Local().Format(time.DateTime))
	}
	tw.Flush()
}

// queues lists the queues (`workron queues`) or pauses or resumes one
// (`workron queues pause|resume NAME`).
func (c *cli) queues(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "limit":
			return c.queueLimit(ctx, fs, args[1:]) // queuelimits.go
		case "pauses":
			return c.listPauses(ctx, fs, args[1:]) // pauses.go
		case "lift":
			return c.liftPauses(ctx, fs, args[1:])
		}
	}
	page := pageFlags(fs, "queue")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 && pos[0] != "ls" && pos[0] != "list" && ((pos[0] != "pause" && pos[0] != "resume" && pos[0] != "get") || len(pos) != 2) {
		return errors.New("queues: give ls, get NAME, pause NAME, resume NAME, limit NAME, pauses or lift NAME")
	}
	if err := c.connect(); err != nil {
		return err
	}
	if (len(pos) == 0 || pos[0] == "ls" || pos[0] == "list") && onePage(page) {
		list, err := c.client.QueueList(ctx, *page)
		if err != nil {
			return err
		}
		return c.print(list, func() { c.printQueues(list.Queues); c.printMore(list.NextCursor) })
	}
	if len(pos) == 0 || pos[0] == "ls" || pos[0] == "list" {
		qs, err := c.client.Queues(ctx)
		if err != nil {
			return err
		}
		return c.print(wire.QueueList{Queues: qs}, func() { c.printQueues(qs) })
	}
	if pos[0] == "get" {
		resp, err := c.client.Do(ctx, client.Request{Method: "GET", Path: "/queues/" + url.PathEscape(pos[1])})
		if err != nil {
			return fmt.Errorf("get queue %s: %w", pos[1], err)
		}
		var q wire.Queue
		if err := json.Unmarshal(resp.Body, &q); err != nil {
			return fmt.Errorf("get queue %s: decode the reply: %w", pos[1], err)
		}
		return c.print(q, func() { c.printQueues([]wire.Queue{q}) })
	}
	act := c.client.PauseQueue
	if pos[0] == "resume" {
		act = c.client.ResumeQueue
	}
	q, err := act(ctx, pos[1])
	if err != nil {
		return err
	}
	return c.print(q, func() { fmt.Fprintf(c.out, "%sd %s\n", pos[0], pos[1]) })
}

func (c *cli) printQueues(qs []wire.Queue) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPAUSED\tBLOCKED\tPENDING\tRUNNING\tDONE\tFAILED\tCANCELLED")
	for _, q := range qs {
		n := q.Counts
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\n", q.Name, q.Paused, n["blocked"], n["pending"], n["running"]+n["cancelling"], n["done"], n["failed"], n["cancelled"])
	}
	tw.Flush()
	c.printPauses(qs) // queuelimits.go
}
