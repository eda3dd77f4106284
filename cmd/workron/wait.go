package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// wait follows a job until it finishes and exits with its exit code (1 for
// a failure without one). It tells on stderr each change as it sees it: the
// status, the attempt, when a retry is due and why a job waits; and when a
// node stops answering, that it moved to another. timeout, when positive,
// bounds the whole wait.
func (c *cli) wait(ctx context.Context, id string, timeout time.Duration) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	c.learnMembers(ctx)
	var last string
	bar := newProgressView(c.stderr)
	defer bar.endLine()
	server := c.client.Server()
	tick := time.NewTicker(c.poll)
	defer tick.Stop()
	for {
		job, err := c.client.Get(ctx, id)
		if now := c.client.Server(); now != server {
			bar.endLine()
			fmt.Fprintf(c.errOut, "%s: %s did not answer; asking %s\n", id, server, now)
			server = now
		}
		switch {
		case err == nil:
			if line := progress(job); line != last {
				bar.endLine()
				fmt.Fprintf(c.errOut, "%s: %s\n", id, line)
				last = line
			}
			if client.Terminal(job.Status) {
				bar.endLine()
				return c.finished(job)
			}
			if job.Status == wire.StatusRunning {
				bar.show(id, job.Progress)
			}
		case ctx.Err() != nil:
			return fmt.Errorf("wait for job %s: %w", id, ctx.Err())
		case client.StatusOf(err) != 0 && client.StatusOf(err) < 500 && client.StatusOf(err) != 429:
			return fmt.Errorf("wait for job %s: %w", id, err)
		default:
			if line := "no node answers: " + err.Error() + "; still trying"; line != last {
				bar.endLine()
				fmt.Fprintf(c.errOut, "%s: %s\n", id, line)
				last = line
			}
		}
		// The job is looked at once at least, however short the timeout.
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return fmt.Errorf("wait for job %s: gave up after --timeout %s (last seen: %s)", id, timeout, cmp.Or(last, "nothing"))
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// learnMembers adds the cluster's other members to the servers the client
// tries, so that wait moves on when the node it asks goes down. Without an
// answer from /cluster it keeps the servers it has.
func (c *cli) learnMembers(ctx context.Context) {
	cl, err := c.client.Cluster(ctx)
	if err != nil {
		return
	}
	servers := splitList(c.flags.server)
	n := len(servers)
	if cur := c.client.Server(); !slices.Contains(servers, cur) {
		servers = append(servers, cur)
	}
	for _, m := range cl.Nodes {
		if m.HTTP != "" && !slices.Contains(servers, m.HTTP) {
			servers = append(servers, m.HTTP)
		}
	}
	if len(servers) == n {
		return
	}
	// Start at the node that answered.
	cur := slices.Index(servers, c.client.Server())
	servers = slices.Concat(servers[cur:], servers[:cur])
	cl2, err := c.flags.sec.newClient(servers, nil, func(cfg *client.Config) { cfg.StaleReads = c.flags.stale })
	if err != nil {
		return
	}
	c.client.Close()
	c.client = cl2
}

// finished prints a finished job and turns its outcome into wait's exit code.
func (c *cli) finished(job *wire.Job) error {
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

// progress is one line on a job's state for wait: its status, which
// attempt of how many, and when and why it waits.
func progress(j *wire.Job) string {
	var b strings.Builder
	b.WriteString(j.Status)
	switch j.Status {
	case wire.StatusRunning, wire.StatusCancelling:
		fmt.Fprintf(&b, ", attempt %d of %d", j.Attempts, j.MaxAttempts)
		if j.WorkerID != "" {
			fmt.Fprintf(&b, " on %s", j.WorkerID)
		}
	case wire.StatusPending, wire.StatusScheduled:
		if j.Attempts > 0 {
			fmt.Fprintf(&b, ", attempt %d of %d failed", j.Attempts, j.MaxAttempts)
			if n := len(j.AttemptHistory); n > 0 && j.AttemptHistory[n-1].Error != "" {
				// A job waiting again shows no current error (the API keeps
				// the last attempt's in its history).
				fmt.Fprintf(&b, " (%s)", j.AttemptHistory[n-1].Error)
			}
		}
		switch {
		case j.Status == wire.StatusScheduled && j.Attempts > 0:
			fmt.Fprintf(&b, ", retry at %s", j.RunAt.Local().Format(time.DateTime))
		case j.Status == wire.StatusScheduled:
			fmt.Fprintf(&b, ", runs at %s", j.RunAt.Local().Format(time.DateTime))
		}
	case wire.StatusBlocked:
		if len(j.DependsOn) > 0 {
			fmt.Fprintf(&b, ", waiting for %s", strings.Join(j.DependsOn, ","))
		}
	default:
		fmt.Fprintf(&b, " after %d of %d attempts", j.Attempts, j.MaxAttempts)
	}
	switch {
	case j.WaitingCode == wire.WaitPaused || j.WaitingCode == wire.WaitNoWorker || j.WaitingCode == wire.WaitResources || j.WaitingCode == wire.WaitLimit || j.WaitingCode == wire.WaitGang:
		// What the status line does not say already: why a ready job is
		// not being taken.
		fmt.Fprintf(&b, ", waiting because %s", j.Waiting)
	case j.Unschedulable != "":
		fmt.Fprintf(&b, ", waiting because %s", j.Unschedulable)
	}
	return b.String()
}
