package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// progressEvery is how often `jobs ls` and `jobs count` say how far a long
// scan got, on stderr.
const progressEvery = 2 * time.Second

// selectFlags registers the flags that choose jobs, for ls and count.
func selectFlags(fs *flag.FlagSet, opts *client.ListOptions, meta *kvFlag) {
	fs.StringVar(&opts.Filter, "filter", "", "only jobs this filter expression keeps, e.g. 'status == \"failed\" and last_error contains \"timeout\"' (docs/api.md, Filters)")
	fs.StringVar(&opts.Status, "status", "", "only jobs in this status")
	fs.StringVar(&opts.Queue, "queue", "", "only jobs in this queue")
	fs.Var(meta, "metadata", "only jobs whose metadata has `K=V`; repeatable, all must match")
}

// jobsList runs `workron jobs ls`: a page of --limit jobs, asked for again
// from where the server stopped as long as its scan budget cut the page
// short, so that the page is full unless the jobs ran out.
func (c *cli) jobsList(ctx context.Context, fs *flag.FlagSet, sub string, args []string) error {
	var (
		opts client.ListOptions
		meta kvFlag
	)
	selectFlags(fs, &opts, &meta)
	fs.IntVar(&opts.Limit, "limit", 20, "at most this many")
	fs.StringVar(&opts.Cursor, "cursor", "", "next_cursor of a previous page")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("jobs %s: unexpected %q", sub, pos[0])
	}
	if err := c.connect(); err != nil {
		return err
	}
	opts.Metadata = meta.m
	list, err := c.fullPage(ctx, opts)
	if err != nil {
		return err
	}
	return c.print(list, func() { c.printJobs(list) })
}

// fullPage gathers up to opts.Limit jobs (the server's default without
// one) over as many requests as partial pages need, saying every
// progressEvery how far it got. The list's NextCursor is the last page's,
// Scanned the sum.
func (c *cli) fullPage(ctx context.Context, opts client.ListOptions) (*wire.JobList, error) {
	out := &wire.JobList{Jobs: []wire.Job{}}
	said := time.Now()
	for {
		page, err := c.client.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out.Jobs = append(out.Jobs, page.Jobs...)
		out.Scanned += page.Scanned
		out.NextCursor = page.NextCursor
		if !page.Partial || page.NextCursor == "" || (opts.Limit > 0 && len(out.Jobs) >= opts.Limit) {
			return out, nil
		}
		if opts.Limit > 0 {
			opts.Limit -= len(page.Jobs)
		}
		opts.Cursor = page.NextCursor
		if time.Since(said) >= progressEvery {
			fmt.Fprintf(c.errOut, "workron: %d jobs examined, %d found so far (Ctrl-C stops)\n", out.Scanned, len(out.Jobs))
			said = time.Now()
		}
	}
}

// jobsCount runs `workron jobs count`: the exact count, by status, over as
// many requests as the server's scan budget needs.
func (c *cli) jobsCount(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var (
		opts client.ListOptions
		meta kvFlag
	)
	selectFlags(fs, &opts, &meta)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("jobs count: unexpected %q", pos[0])
	}
	if err := c.connect(); err != nil {
		return err
	}
	opts.Metadata = meta.m
	total := &wire.JobCount{ByStatus: map[string]int{}}
	said := time.Now()
	for {
		n, err := c.client.Count(ctx, opts)
		if err != nil {
			return err
		}
		total.Count += n.Count
		total.Scanned += n.Scanned
		for st, k := range n.ByStatus {
			total.ByStatus[st] += k
		}
		if n.Exact || n.NextCursor == "" {
			total.Exact = true
			break
		}
		opts.Cursor = n.NextCursor
		if time.Since(said) >= progressEvery {
			fmt.Fprintf(c.errOut, "workron: %d jobs examined, %d counted so far (Ctrl-C stops)\n", total.Scanned, total.Count)
			said = time.Now()
		}
	}
	return c.print(total, func() { c.printCount(total) })
}

// countOrder is the order statuses are printed in: their lifecycle's.
var countOrder = []string{wire.StatusBlocked, wire.StatusScheduled, wire.StatusPending, wire.StatusReserved, wire.StatusRunning,
	wire.StatusCancelling, wire.StatusDone, wire.StatusFailed, wire.StatusCancelled}

func (c *cli) printCount(n *wire.JobCount) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tJOBS")
	rest := maps.Clone(n.ByStatus)
	for _, st := range countOrder {
		if k := n.ByStatus[st]; k > 0 {
			fmt.Fprintf(tw, "%s\t%d\n", st, k)
		}
		delete(rest, st)
	}
	for _, st := range slices.Sorted(maps.Keys(rest)) { // from a newer server
		fmt.Fprintf(tw, "%s\t%d\n", st, rest[st])
	}
	fmt.Fprintf(tw, "total\t%d\n", n.Count)
	tw.Flush()
}
