package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
)

const queueLimitUsage = `queues limit: give the queue's name, then its limits (those left out are removed):
  queues limit NAME                     (shows the limits)
  queues limit NAME [--concurrency N] [--key-concurrency N] [--rate N/s|N/m|N/h] [--burst N] [--key-rate R] [--key-burst N] [--key-weight KEY=N ...]
                    [--rate-limit-pauses-queue] [--max-pause DURATION]
  queues limit NAME --clear             (removes them all)`

// queueLimit shows or sets a queue's flow-control limits
// (`workron queues limit NAME ...`).
func (c *cli) queueLimit(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var (
		req                            wire.QueueLimits
		conc, keyConc, burst, keyBurst int
		clear                          bool
	)
	fs.IntVar(&conc, "concurrency", 0, "at most this many attempts of the queue running, cluster-wide")
	fs.IntVar(&keyConc, "key-concurrency", 0, "at most this many running per concurrency key")
	fs.StringVar(&req.Rate, "rate", "", "claims per period of the queue, e.g. 100/s or 600/m")
	fs.IntVar(&burst, "burst", 0, "the rate's bucket size (default: the rate's count)")
	fs.StringVar(&req.KeyRate, "key-rate", "", "claims per period of each concurrency key")
	fs.IntVar(&keyBurst, "key-burst", 0, "the key rate's bucket size (default: its count)")
	fs.BoolVar(&clear, "clear", false, "remove every limit of the queue")
	fs.Var(keyWeights{&req.KeyWeights}, "key-weight", "KEY=N: give a concurrency key N turns in the queue's rotation over its keys (default 1); repeatable")
	fs.BoolVar(&req.RateLimitPausesQueue, "rate-limit-pauses-queue", false, "let a rate-limited job without a concurrency key pause the whole queue (default: only that job waits)")
	fs.StringVar(&req.MaxPause, "max-pause", "", "the longest pause a rate-limited attempt may ask for, up to 24h (default 5m)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New(queueLimitUsage)
	}
	set := clear
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "concurrency", "key-concurrency", "rate", "burst", "key-rate", "key-burst", "key-weight", "rate-limit-pauses-queue", "max-pause":
			set = true
		}
	})
	if clear && (req.Rate != "" || req.KeyRate != "" || conc != 0 || keyConc != 0 || burst != 0 || keyBurst != 0 || len(req.KeyWeights) > 0 ||
		req.RateLimitPausesQueue || req.MaxPause != "") {
		return errors.New("queues limit: --clear takes no limits")
	}
	if err := c.connect(); err != nil {
		return err
	}
	name := pos[0]
	var q *wire.Queue
	if !set {
		q, err = c.client.QueueLimits(ctx, name)
	} else {
		// A flag given as 0 is sent as 0, which the server refuses.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "concurrency":
				req.Concurrency = &conc
			case "key-concurrency":
				req.KeyConcurrency = &keyConc
			case "burst":
				req.Burst = &burst
			case "key-burst":
				req.KeyBurst = &keyBurst
			}
		})
		q, err = c.client.SetQueueLimits(ctx, name, req)
	}
	if err != nil {
		return err
	}
	return c.print(q, func() { c.printQueueLimits(q) })
}

func (c *cli) printQueueLimits(q *wire.Queue) {
	l := q.Limits
	if l == nil {
		fmt.Fprintf(c.out, "queue %s has no limits\n", q.Name)
		return
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tCONCURRENCY\tKEY CONCURRENCY\tRATE\tKEY RATE\tRUNNING\tWAITING")
	show := func(n *int) string {
		if n == nil {
			return "-"
		}
		return fmt.Sprint(*n)
	}
	rate := func(r string, burst *int) string {
		if r == "" {
			return "-"
		}
		if burst != nil {
			return fmt.Sprintf("%s burst %d", r, *burst)
		}
		return r
	}
	var waiting []string
	for _, k := range []string{"concurrency", "rate", "key_concurrency", "key_rate", "paused", "key_paused"} {
		if n := l.Waiting[k]; n > 0 {
			waiting = append(waiting, fmt.Sprintf("%d on %s", n, k))
		}
	}
	if len(waiting) == 0 {
		waiting = []string{"0"}
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", q.Name, show(l.Concurrency), show(l.KeyConcurrency),
		rate(l.Rate, l.Burst), rate(l.KeyRate, l.KeyBurst), l.Running, strings.Join(waiting, ", "))
	tw.Flush()
	if len(l.KeyWeights) > 0 {
		var ws []string
		for _, k := range slices.Sorted(maps.Keys(l.KeyWeights)) {
			ws = append(ws, fmt.Sprintf("%s=%d", k, l.KeyWeights[k]))
		}
		fmt.Fprintf(c.out, "key weights: %s\n", strings.Join(ws, " "))
	}
	if l.RateLimitPausesQueue || l.MaxPause != "" {
		fmt.Fprintf(c.out, "rate limits: a job without a key pauses the queue: %v; max pause: %s\n", l.RateLimitPausesQueue, cmp.Or(l.MaxPause, "5m (default)"))
	}
	c.printPauses([]wire.Queue{*q})
}

// printPauses lists the queues and keys that rate-limited attempts paused.
func (c *cli) printPauses(qs []wire.Queue) {
	for _, q := range qs {
		if q.Limits == nil {
			continue
		}
		for _, p := range q.Limits.Paused {
			what := "queue " + q.Name
			if p.Key != "" {
				what = fmt.Sprintf("queue %s key %s", q.Name, p.Key)
			}
			line := fmt.Sprintf("%s rate-limited until %s", what, p.Until.Local().Format(time.DateTime))
			if p.Reason != "" {
				line += " (" + p.Reason + ")"
			}
			fmt.Fprintln(c.out, line)
		}
	}
}

// keyWeights is the --key-weight flag: KEY=N, repeatable.
type keyWeights struct{ m *map[string]int }

func (k keyWeights) String() string {
	if k.m == nil || *k.m == nil {
		return ""
	}
	return fmt.Sprint(*k.m)
}

func (k keyWeights) Set(v string) error {
	key, n, ok := strings.Cut(v, "=")
	w, err := strconv.Atoi(n)
	if !ok || key == "" || err != nil {
		return fmt.Errorf("want KEY=N, got %q", v)
	}
	if *k.m == nil {
		*k.m = make(map[string]int)
	}
	(*k.m)[key] = w
	return nil
}
