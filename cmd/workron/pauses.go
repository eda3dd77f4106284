package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// listPauses lists the rate-limit pauses in force (`workron queues
// pauses`, GET /pauses).
func (c *cli) listPauses(ctx context.Context, fs *flag.FlagSet, args []string) error {
	page := pageFlags(fs, "pause")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return errors.New("queues pauses: takes no arguments")
	}
	if page.Limit < 0 || page.Limit > 1000 {
		return fmt.Errorf("queues pauses: --limit must be from 1 to 1000, got %d", page.Limit)
	}
	if err := c.connect(); err != nil {
		return err
	}
	var l wire.PauseList
	q := url.Values{"limit": {"1000"}}
	if page.Limit > 0 {
		q.Set("limit", strconv.Itoa(page.Limit))
	}
	for cursor := page.Cursor; ; {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		resp, err := c.client.Do(ctx, client.Request{Method: "GET", Path: "/pauses", Query: q, Idempotent: true})
		if err != nil {
			return fmt.Errorf("list pauses: %w", err)
		}
		var p wire.PauseList
		if err := json.Unmarshal(resp.Body, &p); err != nil {
			return fmt.Errorf("list pauses: decode the reply: %w", err)
		}
		l.Pauses, l.Total, l.NextCursor = append(l.Pauses, p.Pauses...), p.Total, p.NextCursor
		if cursor = p.NextCursor; cursor == "" || onePage(page) {
			break
		}
	}
	return c.print(l, func() {
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "QUEUE\tKEY\tUNTIL\tREASON")
		for _, p := range l.Pauses {
			key := p.Key
			if key == "" {
				key = "(the queue)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Queue, key, p.Until.Local().Format(time.DateTime), p.Reason)
		}
		tw.Flush()
		c.printMore(l.NextCursor)
	})
}

// liftPauses ends a queue's rate-limit pauses early (`workron queues lift
// NAME [--key KEY]`, DELETE /queues/{name}/pauses).
func (c *cli) liftPauses(ctx context.Context, fs *flag.FlagSet, args []string) error {
	key := fs.String("key", "", "lift only this concurrency key's pause (default: the queue's own and every key's)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("queues lift: give the queue's name, and --key KEY to lift one key's pause only")
	}
	if err := c.connect(); err != nil {
		return err
	}
	req := client.Request{Method: "DELETE", Path: "/queues/" + url.PathEscape(pos[0]) + "/pauses", Idempotent: true}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "key" {
			req.Query = url.Values{"key": {*key}}
		}
	})
	resp, err := c.client.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("lift the pauses of queue %s: %w", pos[0], err)
	}
	var lifted wire.PausesLifted
	if err := json.Unmarshal(resp.Body, &lifted); err != nil {
		return fmt.Errorf("lift the pauses of queue %s: decode the reply: %w", pos[0], err)
	}
	return c.print(lifted, func() { fmt.Fprintf(c.out, "lifted %d pause(s) of queue %s\n", lifted.Lifted, pos[0]) })
}
