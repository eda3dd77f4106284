package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// cliFlags are the flags every client verb takes.
type cliFlags struct {
	server string
	output string
	sec    clientSecurity
}

func (c *cliFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", envOr("WORKRON_SERVER", "http://127.0.0.1:7070"), "node URLs, comma-separated (env WORKRON_SERVER)")
	fs.StringVar(&c.output, "o", "table", "output: table or json")
	c.sec.register(fs, "token")
}

// cli is one client verb's context.
type cli struct {
	flags  cliFlags
	client *client.Client
	out    io.Writer
}

func runClient(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &cli{out: stdout}
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
	}
	return fmt.Errorf("unknown command %q", verb)
}

func (c *cli) connect() error {
	if c.flags.output != "table" && c.flags.output != "json" {
		return fmt.Errorf("-o: %q is not table or json", c.flags.output)
	}
	cl, err := c.flags.sec.newClient(splitList(c.flags.server), nil)
	if err != nil {
		return err
	}
	c.client = cl
	return nil
}

// parse parses flags that may come before or after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func (c *cli) submit(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var (
		req                             wire.SubmitRequest
		maxAttempts                     int
		depends, env, meta, tags, pload string
		res                             wire.Resources
		wait                            bool
	)
	fs.StringVar(&req.Queue, "queue", "", "queue (default \"default\")")
	fs.IntVar(&req.Priority, "priority", 0, "priority; higher runs first")
	fs.IntVar(&maxAttempts, "max-attempts", 0, "total attempts (default 3)")
	fs.StringVar(&depends, "depends-on", "", "job ids this job waits for, comma-separated")
	fs.StringVar(&req.Timeout, "timeout", "", "per-attempt timeout, e.g. 90s")
	fs.StringVar(&req.Delay, "delay", "", "run after this delay, e.g. 5m")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "submit at most once per key")
	fs.StringVar(&env, "env", "", "environment K=V pairs, comma-separated")
	fs.StringVar(&meta, "metadata", "", "metadata K=V pairs, comma-separated")
	fs.BoolVar(&wait, "wait", false, "wait until the job finishes and exit with its exit code")
	fs.StringVar(&req.Type, "type", "", "a typed job for the Go handler registered under this name, instead of a command")
	fs.StringVar(&pload, "payload", "", "the typed job's payload, a JSON document")
	fs.StringVar(&tags, "tags", "", "tags its worker must offer, comma-separated")
	fs.IntVar(&res.VRAMMB, "vram-mb", 0, "VRAM an attempt needs of its worker, in MB")
	fs.IntVar(&res.MemoryMB, "memory-mb", 0, "memory an attempt needs of its worker, in MB")
	fs.IntVar(&res.CPUMillis, "cpu-millis", 0, "CPU an attempt needs of its worker, in thousandths of a core")
	fs.IntVar(&res.Slots, "slots", 0, "worker slots an attempt takes (default 1)")
	fs.IntVar(&req.GangSize, "gang-size", 0, "run as a gang of this many tasks, placed and started all at once")
	fs.StringVar(&req.ConcurrencyKey, "concurrency-key", "", "the job's key for its queue's per-key limits (a tenant, a customer)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case req.Type == "" && len(pos) == 0:
		return errors.New("submit: give the command after --, e.g. workron submit -- echo hello, or a --type")
	case req.Type != "" && len(pos) > 0:
		return errors.New("submit: give a command or a --type, not both")
	case pload != "" && req.Type == "":
		return errors.New("submit: --payload goes with --type")
	case pload != "" && !json.Valid([]byte(pload)):
		return fmt.Errorf("submit: --payload is not a JSON document: %q", pload)
	}
	req.Command = strings.Join(pos, " ")
	if pload != "" {
		req.Payload = json.RawMessage(pload)
	}
	req.Tags = splitList(tags)
	if res != (wire.Resources{}) {
		req.Resources = &res
	}
	if maxAttempts != 0 {
		req.MaxAttempts = &maxAttempts
	}
	req.DependsOn = splitList(depends)
	if req.Env, err = pairs("env", env); err != nil {
		return err
	}
	if req.Metadata, err = pairs("metadata", meta); err != nil {
		return err
	}
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
		return c.print(g, func() { fmt.Fprintf(c.out, "%s: %s\n", g.GangID, strings.Join(g.Tasks, " ")) })
	}
	job, err := c.client.Submit(ctx, req)
	if err != nil {
		return err
	}
	if wait {
		return c.wait(ctx, job.ID)
	}
	return c.print(job, func() { fmt.Fprintln(c.out, job.ID) })
}

func pairs(field, s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := make(map[string]string)
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s: %q is not K=V", field, kv)
		}
		out[k] = v
	}
	return out, nil
}

func (c *cli) jobs(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var opts client.ListOptions
	fs.StringVar(&opts.Status, "status", "", "only jobs in this status")
	fs.StringVar(&opts.Queue, "queue", "", "only jobs in this queue")
	fs.IntVar(&opts.Limit, "limit", 20, "at most this many")
	fs.StringVar(&opts.Cursor, "cursor", "", "next_cursor of a previous page")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("jobs: give ls, get ID, cancel ID, retry ID or wait ID")
	}
	if err := c.connect(); err != nil {
		return err
	}
	sub := pos[0]
	if sub == "ls" || sub == "list" {
		list, err := c.client.List(ctx, opts)
		if err != nil {
			return err
		}
		return c.print(list, func() { c.printJobs(list) })
	}
	if len(pos) != 2 {
		return fmt.Errorf("jobs %s: give exactly one job id", sub)
	}
	id := pos[1]
	var job *wire.Job
	switch sub {
	case "get":
		job, err = c.client.Get(ctx, id)
	case "cancel":
		job, err = c.client.Cancel(ctx, id)
	case "retry":
		job, err = c.client.Retry(ctx, id)
	case "wait":
		return c.wait(ctx, id)
	default:
		return fmt.Errorf("jobs: unknown subcommand %q", sub)
	}
	if err != nil {
		return err
	}
	return c.print(job, func() { c.printJob(job) })
}

// wait follows a job until it finishes and exits with its exit code (1 for
// a failure without one).
func (c *cli) wait(ctx context.Context, id string) error {
	job, err := c.client.Wait(ctx, id, 200*time.Millisecond)
	if err != nil {
		return err
	}
	if err := c.print(job, func() { c.printJob(job) }); err != nil {
		return err
	}
	switch {
	case job.Status == wire.StatusDone:
		return nil
	case job.ExitCode != nil && *job.ExitCode != 0:
		return &exitError{code: *job.ExitCode}
	}
	return &exitError{code: 1}
}

func (c *cli) print(v any, table func()) error {
	if c.flags.output == "json" {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	table()
	return nil
}

func (c *cli) printJobs(list *wire.JobList) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tQUEUE\tPRIO\tATTEMPTS\tCREATED\tCOMMAND")
	for _, j := range list.Jobs {
		cmd := j.Command
		if cmd == "" {
			cmd = "type:" + j.Type
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\n", j.ID, j.Status, j.Queue, j.Priority, j.Attempts, j.MaxAttempts,
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
	row("command", j.Command)
	row("type", j.Type)
	row("queue", j.Queue)
	row("concurrency_key", j.ConcurrencyKey)
	row("priority", fmt.Sprint(j.Priority))
	row("attempts", fmt.Sprintf("%d/%d", j.Attempts, j.MaxAttempts))
	row("depends_on", strings.Join(j.DependsOn, ","))
	row("schedule", j.Schedule)
	if j.ScheduledFor != nil {
		row("scheduled_for", j.ScheduledFor.Local().Format(time.DateTime))
	}
	row("worker", j.WorkerID)
	if j.ExitCode != nil {
		row("exit_code", fmt.Sprint(*j.ExitCode))
	}
	row("last_error", j.LastError)
	tw.Flush()
	if j.Output != "" {
		fmt.Fprintf(c.out, "output:\n%s", j.Output)
		if !strings.HasSuffix(j.Output, "\n") {
			fmt.Fprintln(c.out)
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// workers lists the workers (`workron workers`).
func (c *cli) workers(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	ws, err := c.client.Workers(ctx)
	if err != nil {
		return err
	}
	return c.print(wire.WorkerList{Workers: ws}, func() { c.printWorkers(ws) })
}

func (c *cli) printWorkers(ws []wire.Worker) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tRUNNING\tSLOTS\tQUEUES\tLAST HEARTBEAT")
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", w.ID, w.Status, w.RunningJobs, w.Resources.Slots, strings.Join(w.Queues, ","), w.LastHeartbeat.Local().Format(time.DateTime))
	}
	tw.Flush()
}

// queues lists the queues (`workron queues`) or pauses or resumes one
// (`workron queues pause|resume NAME`).
func (c *cli) queues(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if len(args) > 0 && args[0] == "limit" {
		return c.queueLimit(ctx, fs, args[1:]) // queuelimits.go
	}
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 && pos[0] != "ls" && pos[0] != "list" && ((pos[0] != "pause" && pos[0] != "resume") || len(pos) != 2) {
		return errors.New("queues: give ls, pause NAME, resume NAME or limit NAME")
	}
	if err := c.connect(); err != nil {
		return err
	}
	if len(pos) == 0 || pos[0] == "ls" || pos[0] == "list" {
		qs, err := c.client.Queues(ctx)
		if err != nil {
			return err
		}
		return c.print(wire.QueueList{Queues: qs}, func() { c.printQueues(qs) })
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
}

func (c *cli) cluster(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var join wire.JoinRequest
	fs.StringVar(&join.ID, "id", "", "join: the new node's id")
	fs.StringVar(&join.Raft, "raft", "", "join: the new node's Raft host:port")
	fs.StringVar(&join.HTTP, "http", "", "join: the new node's HTTP base URL")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("cluster: give status, join or remove ID")
	}
	if err := c.connect(); err != nil {
		return err
	}
	switch pos[0] {
	case "status":
		cl, err := c.client.Cluster(ctx)
		if err != nil {
			return err
		}
		return c.print(cl, func() { printCluster(c.out, cl) })
	case "join":
		if _, err := c.client.Join(ctx, join); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "joined %s\n", join.ID)
		return nil
	case "remove":
		if len(pos) != 2 {
			return errors.New("cluster remove: give the node id")
		}
		rm, err := c.client.RemoveNode(ctx, pos[1])
		if err != nil {
			return err
		}
		if rm == nil || rm.Message == "" {
			rm = &wire.Removal{Removed: pos[1], Message: "removed " + pos[1]} // an older server's 204
		}
		return c.print(rm, func() { fmt.Fprintln(c.out, rm.Message) })
	}
	return fmt.Errorf("cluster: unknown subcommand %q", pos[0])
}

// printCluster shows each member with its health as the answering node
// probed it: HEALTH is the member's /health status or "unreachable",
// PROTOCOL the protocol version of its binary.
func printCluster(out io.Writer, cl *wire.Cluster) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tHEALTH\tAPPLIED\tPROTOCOL\tHTTP\tRAFT")
	for _, n := range cl.Nodes {
		health, applied, protocol := "unknown", "-", "-"
		if h := n.Health; h != nil {
			health = h.Status
			if h.Reachable {
				applied, protocol = fmt.Sprint(h.AppliedIndex), fmt.Sprint(max(h.Protocol, 1))
			} else {
				health = "unreachable"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Role, health, applied, protocol, cmp.Or(n.HTTP, "-"), cmp.Or(n.Raft, "-"))
	}
	tw.Flush()
	fmt.Fprintf(out, "leader: %s, applied index: %d", cl.Leader, cl.AppliedIndex)
	if cl.Protocol > 0 { // absent from releases before protocol versions
		fmt.Fprintf(out, ", protocol: %d", cl.Protocol)
	}
	fmt.Fprintln(out)
	for _, n := range cl.Nodes {
		if h := n.Health; h != nil && !h.Reachable && h.Error != "" {
			fmt.Fprintf(out, "%s: %s\n", n.ID, h.Error)
		}
	}
}
