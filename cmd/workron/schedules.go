package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	// Schedules name IANA time zones; carry the database so that every
	// node that may lead knows the same zones, whatever its OS has.
	_ "time/tzdata"

	"github.com/workron/workron/api/wire"
)

const schedulesUsage = `schedules: give one of
  ls
  get NAME
  create NAME --cron EXPR [--timezone TZ] [--overlap allow|skip|queue] [--catchup none|one|all] [job flags] -- COMMAND...
  create NAME --file SCHEDULE.json     (the body of POST /schedules; - reads stdin)
  update NAME ...                      (same as create; replaces the definition)
  delete NAME | pause NAME | resume NAME | trigger NAME`

// schedules runs `workron schedules ...`.
func (c *cli) schedules(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var (
		req                      wire.ScheduleRequest
		file, env, meta, payload string
		maxAttempts              int
	)
	fs.StringVar(&req.Cron, "cron", "", `create/update: "*/5 * * * *", "0 30 2 * * *" (with seconds), "@daily", "@every 30s"`)
	fs.StringVar(&req.Timezone, "timezone", "", "create/update: IANA time zone of the cron expression (default UTC)")
	fs.StringVar(&req.Overlap, "overlap", "", "create/update: allow, skip or queue while the previous run is unfinished (default allow)")
	fs.StringVar(&req.Catchup, "catchup", "", "create/update: ticks missed without a leader to run: none, one or all (default one)")
	fs.BoolVar(&req.Paused, "paused", false, "create/update: start paused")
	fs.StringVar(&file, "file", "", "create/update: read the schedule as JSON from this file (- for stdin)")
	fs.StringVar(&req.Job.Queue, "queue", "", "job: queue (default \"default\")")
	fs.IntVar(&req.Job.Priority, "priority", 0, "job: priority; higher runs first")
	fs.IntVar(&maxAttempts, "max-attempts", 0, "job: total attempts (default 3)")
	fs.StringVar(&req.Job.Timeout, "timeout", "", "job: per-attempt timeout, e.g. 90s")
	fs.StringVar(&req.Job.Type, "type", "", "job: typed-handler job type, instead of a command")
	fs.StringVar(&payload, "payload", "", "job: JSON payload of a typed job")
	fs.StringVar(&env, "env", "", "job: environment K=V pairs, comma-separated")
	fs.StringVar(&meta, "metadata", "", "job: metadata K=V pairs, comma-separated")
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
	if sub == "ls" || sub == "list" {
		return c.get(ctx, "/schedules", func(body []byte) error { return c.printSchedules(body) })
	}
	if len(pos) < 2 {
		return fmt.Errorf("schedules %s: give the schedule's name\n%s", sub, schedulesUsage)
	}
	name := pos[1]
	path := "/schedules/" + url.PathEscape(name)
	if sub != "create" && sub != "update" && len(pos) > 2 {
		return fmt.Errorf("schedules %s: unexpected %q", sub, pos[2])
	}
	switch sub {
	case "get":
		return c.get(ctx, path, func(body []byte) error { return c.printSchedule(body) })
	case "create", "update":
		if file != "" {
			if req, err = readSchedule(file); err != nil {
				return err
			}
		} else {
			req.Job.Command = strings.Join(pos[2:], " ")
			if maxAttempts != 0 {
				req.Job.MaxAttempts = &maxAttempts
			}
			if payload != "" {
				req.Job.Payload = json.RawMessage(payload)
			}
			if req.Job.Env, err = pairs("env", env); err != nil {
				return err
			}
			if req.Job.Metadata, err = pairs("metadata", meta); err != nil {
				return err
			}
		}
		req.Name = name
		method := http.MethodPost
		if sub == "create" {
			path = "/schedules"
		} else {
			method = http.MethodPut
		}
		body, err := c.raw(ctx, method, path, req)
		if err != nil {
			return err
		}
		return c.show(body, func() error { return c.printSchedule(body) })
	case "delete", "rm":
		if _, err := c.raw(ctx, http.MethodDelete, path, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "deleted %s\n", name)
		return nil
	case "pause", "resume":
		body, err := c.raw(ctx, http.MethodPost, path+"/"+sub, nil)
		if err != nil {
			return err
		}
		return c.show(body, func() error { return c.printSchedule(body) })
	case "trigger":
		body, err := c.raw(ctx, http.MethodPost, path+"/trigger", nil)
		if err != nil {
			return err
		}
		return c.show(body, func() error {
			var j wire.Job
			if err := json.Unmarshal(body, &j); err != nil {
				return err
			}
			fmt.Fprintln(c.out, j.ID)
			return nil
		})
	}
	return fmt.Errorf("schedules: unknown subcommand %q\n%s", sub, schedulesUsage)
}

func readSchedule(file string) (wire.ScheduleRequest, error) {
	var req wire.ScheduleRequest
	var (
		data []byte
		err  error
	)
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return req, fmt.Errorf("--file: %w", err)
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return req, fmt.Errorf("--file %s: %w", file, err)
	}
	return req, nil
}

// get fetches path and prints it: as it came with -o json, else by table.
func (c *cli) get(ctx context.Context, path string, table func([]byte) error) error {
	body, err := c.raw(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return c.show(body, func() error { return table(body) })
}

// show writes a JSON reply as it came with -o json, else calls table.
func (c *cli) show(body []byte, table func() error) error {
	if c.flags.output == "json" {
		_, err := c.out.Write(body)
		return err
	}
	return table()
}

func (c *cli) printSchedules(body []byte) error {
	var list wire.ScheduleList
	if err := json.Unmarshal(body, &list); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTIMEZONE\tNEXT RUN\tLAST RUN\tLAST STATUS\tRUNS\tOVERLAP\tPAUSED")
	for _, s := range list.Schedules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%v\n", s.Name, s.Cron, s.Timezone, showTime(s.NextRun), showTime(s.LastRun),
			orDash(s.LastJobStatus), s.Runs, s.Overlap, s.Paused)
	}
	return tw.Flush()
}

func (c *cli) printSchedule(body []byte) error {
	var s wire.Schedule
	if err := json.Unmarshal(body, &s); err != nil {
		return err
	}
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
	return tw.Flush()
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
