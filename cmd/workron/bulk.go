package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
)

// bulkFlags are the filters and options of a bulk action's verb (`jobs
// retry --status failed --queue emails`).
type bulkFlags struct {
	req      wire.BulkRequest
	meta     kvFlag
	priority int
	yes      bool
	noFollow bool
}

func (b *bulkFlags) register(fs *flag.FlagSet, action string) {
	fs.StringVar(&b.req.Status, "status", "", "every job in this status (bulk)")
	fs.StringVar(&b.req.Queue, "queue", "", "every job in this queue (bulk)")
	fs.Var(&b.meta, "metadata", "every job whose metadata has `K=V`; repeatable, all must match (bulk)")
	fs.StringVar(&b.req.Filter, "filter", "", "every job this filter `EXPR`ession matches (the filter language of jobs ls) (bulk)")
	fs.BoolVar(&b.yes, "yes", false, "do not ask for confirmation (bulk)")
	fs.BoolVar(&b.noFollow, "no-follow", false, "print the bulk action's id and return without following its progress (bulk)")
	if action == "priority" {
		fs.IntVar(&b.priority, "priority", 0, "the new priority")
	}
}

// set reports whether any filter was given: the verb is then a bulk one.
func (b *bulkFlags) set() bool {
	return b.req.Status != "" || b.req.Queue != "" || len(b.meta.m) > 0 || b.req.Filter != ""
}

// bulk runs `workron jobs cancel|retry|delete|priority FILTERS`: counts
// what matches, asks for confirmation (unless --yes), starts the bulk
// action and follows its progress until it ends.
func (c *cli) bulk(ctx context.Context, action string, b *bulkFlags) error {
	if !b.set() {
		return fmt.Errorf("jobs %s: give filters (--status, --queue, --metadata, --filter)", action)
	}
	req := b.req
	req.Action, req.Metadata = action, b.meta.m
	if action == "priority" {
		p := b.priority
		req.Priority = &p
	}
	n, err := c.client.CountBulk(ctx, req)
	if err != nil {
		return err
	}
	count := fmt.Sprint(n.Matched)
	if !n.Exact {
		count = "at least " + count
	}
	if !b.yes {
		if !confirm(c, fmt.Sprintf("%s %s jobs? [y/N] ", action, count)) {
			return errors.New("not confirmed: nothing was done")
		}
	}
	op, err := c.client.StartBulk(ctx, req)
	if err != nil {
		return err
	}
	if b.noFollow {
		return c.print(op, func() { fmt.Fprintln(c.out, op.ID) })
	}
	fmt.Fprintf(c.errOut, "bulk %s %s: %s jobs matched now\n", op.ID, action, count)
	return c.followBulk(ctx, op)
}

// confirm asks on stderr and reads a yes from stdin.
func confirm(c *cli, prompt string) bool {
	fmt.Fprint(c.errOut, prompt)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// followBulk polls a bulk action until it ends, showing its progress on
// a terminal as one line rewritten as it moves, and prints the action at
// the end.
func (c *cli) followBulk(ctx context.Context, op *wire.Bulk) error {
	tty, last := isTerminal(c.stderr), ""
	defer func() {
		if tty && last != "" {
			fmt.Fprintln(c.errOut)
		}
	}()
	for op.State == wire.BulkRunning {
		if line := bulkProgress(op); tty && line != last {
			fmt.Fprintf(c.errOut, "\r%s\x1b[K", line)
			last = line
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bulk %s goes on without us (workron jobs bulk get %s): %w", op.ID, op.ID, ctx.Err())
		case <-time.After(c.poll):
		}
		next, err := c.client.GetBulk(ctx, op.ID)
		if err != nil {
			return err
		}
		op = next
	}
	return c.print(op, func() { fmt.Fprintln(c.out, bulkProgress(op)) })
}

func bulkProgress(op *wire.Bulk) string {
	s := fmt.Sprintf("bulk %s %s: %s, matched %d, done %d, skipped %d, failed %d", op.ID, op.Action, op.State, op.Matched, op.Done, op.Skipped, op.Failed)
	if op.LastError != "" {
		s += ", last error: " + op.LastError
	}
	return s
}

const bulkUsage = `jobs bulk: give one of
  ls
  get ID
  stop ID`

// bulkVerb runs `workron jobs bulk ls|get|stop`.
func (c *cli) bulkVerb(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if len(args) == 0 {
		return errors.New(bulkUsage)
	}
	sub, args := args[0], args[1:]
	fs.Init("jobs bulk "+sub, flag.ContinueOnError)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	switch sub {
	case "ls", "list":
		bs, err := c.client.Bulks(ctx)
		if err != nil {
			return err
		}
		return c.print(wire.BulkList{Bulks: bs}, func() {
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tACTION\tSTATE\tMATCHED\tDONE\tSKIPPED\tFAILED\tCREATED\tSELECTOR")
			for _, b := range bs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", b.ID, b.Action, b.State, b.Matched, b.Done, b.Skipped, b.Failed,
					b.CreatedAt.Local().Format(time.DateTime), truncate(b.Selector, 60))
			}
			tw.Flush()
		})
	case "get", "stop":
		if len(pos) != 1 {
			return fmt.Errorf("jobs bulk %s: give exactly one bulk action id", sub)
		}
		get := c.client.GetBulk
		if sub == "stop" {
			get = c.client.StopBulk
		}
		op, err := get(ctx, pos[0])
		if err != nil {
			return err
		}
		return c.print(op, func() { fmt.Fprintln(c.out, bulkProgress(op)) })
	}
	return fmt.Errorf("jobs bulk: unknown subcommand %q\n%s", sub, bulkUsage)
}
