package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	// Schedules name IANA time zones; carry the database so that every
	// node that may lead knows the same zones, whatever its OS has.
	_ "time/tzdata"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

const schedulesUsage = `schedules: give one of
  ls [--limit N] [--cursor C]
  get NAME
  create NAME --cron EXPR [--timezone TZ] [--overlap allow|skip|queue] [--catchup none|one|all] [job flags] -- COMMAND...
  create NAME --file SCHEDULE.json     (the body of POST /schedules; - reads stdin)
  update NAME [flags] [-- COMMAND...]  (changes only the fields given; the rest, paused included, stays)
  delete NAME | pause NAME | resume NAME | trigger NAME`

// schedules runs `workron schedules ...`.
func (c *cli) schedules(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var (
		req  wire.ScheduleRequest
		jf   jobFlags
		file string
	)
	fs.StringVar(&req.Cron, "cron", "", `create/update: "*/5 * * * *", "0 30 2 * * *" (with seconds), "@daily", "@every 30s"`)
	fs.StringVar(&req.Timezone, "timezone", "", "create/update: IANA time zone of the cron expression (default UTC)")
	fs.StringVar(&req.Overlap, "overlap", "", "create/update: allow, skip or queue while the previous run is unfinished (default allow)")
	fs.StringVar(&req.Catchup, "catchup", "", "create/update: ticks missed without a leader to run: none, one or all (default one)")
	fs.BoolVar(&req.Paused, "paused", false, "create: start paused (update keeps the schedule's state; use pause and resume)")
	fs.StringVar(&file, "file", "", "create/update: read the schedule as JSON from this file (- for stdin)")
	jf.register(fs, &req.Job, "job: ")
	page := pageFlags(fs, "schedule")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New(schedulesUsage)
	}
	if err := c.connect(); err != nil {
		return err
	}
	sub := pos[0]
	if (sub == "ls" || sub == "list") && onePage(page) {
		list, err := c.client.ScheduleList(ctx, *page)
		if err != nil {
			return err
		}
		return c.print(list, func() { c.printSchedules(list.Schedules); c.printMore(list.NextCursor) })
	}
	if sub == "ls" || sub == "list" {
		list, err := c.client.Schedules(ctx)
		if err != nil {
			return err
		}
		return c.print(wire.ScheduleList{Schedules: list}, func() { c.printSchedules(list) })
	}
	if len(pos) < 2 {
		return fmt.Errorf("schedules %s: give the schedule's name\n%s", sub, schedulesUsage)
	}
	name := pos[1]
	if sub != "create" && sub != "update" && len(pos) > 2 {
		return fmt.Errorf("schedules %s: unexpected %q", sub, pos[2])
	}
	var sc *wire.Schedule
	switch sub {
	case "get":
		sc, err = c.client.Schedule(ctx, name)
	case "create", "update":
		switch {
		case file != "":
			sc, err = c.scheduleFile(ctx, sub, name, file)
		default:
			// update changes only what it names: without a command, the
			// schedule's stays.
			if err := jf.fill(&req.Job, pos[2:], "schedules "+sub, sub == "update"); err != nil {
				return err
			}
			req.Name = name
			if sub == "create" {
				sc, err = c.client.CreateSchedule(ctx, req)
			} else {
				sc, err = c.client.UpdateSchedule(ctx, req)
			}
		}
		if err == nil {
			c.warn(sc.Warnings)
		}
	case "delete", "rm":
		if err := c.client.DeleteSchedule(ctx, name); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "deleted %s\n", name)
		return nil
	case "pause":
		sc, err = c.client.PauseSchedule(ctx, name)
	case "resume":
		sc, err = c.client.ResumeSchedule(ctx, name)
	case "trigger":
		j, err := c.client.TriggerSchedule(ctx, name)
		if err != nil {
			return err
		}
		return c.print(j, func() { fmt.Fprintln(c.out, j.ID) })
	default:
		return fmt.Errorf("schedules: unknown subcommand %q\n%s", sub, schedulesUsage)
	}
	if err != nil {
		return err
	}
	return c.print(sc, func() { c.printSchedule(sc) })
}

// scheduleFile sends a schedule's JSON from a file (- for stdin) as it is,
// with the name given on the command line, so that the server can warn
// about fields it does not know: POST /schedules for create, PUT
// /schedules/{name} for update.
func (c *cli) scheduleFile(ctx context.Context, sub, name, file string) (*wire.Schedule, error) {
	data, err := readInput(file)
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("--file %s: %w", file, err)
	}
	body["name"], _ = json.Marshal(name)
	req := client.Request{Method: "POST", Path: "/schedules", Body: body}
	if sub == "update" {
		req.Method, req.Path = "PUT", "/schedules/"+url.PathEscape(name)
	}
	resp, err := c.client.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s schedule %s: %w", sub, name, err)
	}
	var sc wire.Schedule
	if err := json.Unmarshal(resp.Body, &sc); err != nil {
		return nil, fmt.Errorf("%s schedule %s: decode the reply: %w", sub, name, err)
	}
	return &sc, nil
}

func (c *cli) printSchedules(list []wire.Schedule) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTIMEZONE\tNEXT RUN\tLAST RUN\tLAST STATUS\tRUNS\tOVERLAP\tPAUSED")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%v\n", s.Name, s.Cron, s.Timezone, showTime(s.NextRun), showTime(s.LastRun),
			orDash(s.LastJobStatus), s.Runs, s.Overlap, s.Paused)
	}
	tw.Flush()
}

func (c *cli) printSchedule(s *wire.Schedule) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	what := s.Job.Command
	if what == "" {
		what = "type:" + s.Job.Type
	}
	row("name", s.Name)
	row("cron", s.Cron)
	row("timezone", s.Timezone)
	row("job", what)
	row("queue", s.Job.Queue)
	row("overlap", s.Overlap)
	row("catchup", s.Catchup)
	row("paused", fmt.Sprint(s.Paused))
	row("next_run", showTime(s.NextRun))
	row("last_run", showTime(s.LastRun))
	row("last_job", s.LastJobID)
	row("last_status", s.LastJobStatus)
	row("last_error", s.LastError)
	row("runs", fmt.Sprintf("%d (skipped %d, missed %d)", s.Runs, s.Skipped, s.Missed))
	tw.Flush()
}

func showTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
