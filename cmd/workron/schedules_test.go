package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestSchedulesCLI drives every `workron schedules` verb against a one-node
// cluster.
func TestSchedulesCLI(t *testing.T) {
	c := clustertest.New(t, 1)
	server := "--server=" + c.URL(0)
	// withServer puts the --server flag before a "--", after which every
	// word is the job's command.
	withServer := func(args []string) []string {
		i := slices.Index(args, "--")
		if i < 0 {
			i = len(args)
		}
		return slices.Concat(args[:i], []string{server}, args[i:])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := func(t *testing.T, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(ctx, withServer(args), &stdout, &stderr); err != nil {
			t.Fatalf("workron %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	cliFails := func(t *testing.T, says string, args ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(ctx, withServer(args), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Fatalf("workron %s: err %v, want one saying %q", strings.Join(args, " "), err, says)
		}
	}

	out := cli(t, "schedules", "create", "nightly", "--cron", "30 2 * * *", "--timezone", "Europe/Paris",
		"--overlap", "skip", "--queue", "ops", "--env", "A=1", "--", "echo", "backup")
	for _, want := range []string{"nightly", "30 2 * * *", "Europe/Paris", "echo backup", "ops", "skip", "next_run"} {
		if !strings.Contains(out, want) {
			t.Errorf("create printed no %q:\n%s", want, out)
		}
	}
	cliFails(t, "cron", "schedules", "create", "bad", "--cron", "every day", "--", "true")
	cliFails(t, "timezone", "schedules", "create", "bad", "--cron", "@daily", "--timezone", "Mars/Base", "--", "true")
	cliFails(t, "409", "schedules", "create", "nightly", "--cron", "@daily", "--", "true")

	spec := filepath.Join(t.TempDir(), "hourly.json")
	data, _ := json.Marshal(wire.ScheduleRequest{Cron: "@hourly", Catchup: "none", Job: wire.SubmitRequest{Type: "report", Payload: json.RawMessage(`{"n":1}`)}})
	if err := os.WriteFile(spec, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, "schedules", "create", "hourly", "--file", spec)

	out = cli(t, "schedules", "ls")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "hourly") || !strings.HasPrefix(lines[2], "nightly") {
		t.Fatalf("ls:\n%s", out)
	}
	var got wire.Schedule
	if err := json.Unmarshal([]byte(cli(t, "schedules", "get", "hourly", "-o", "json")), &got); err != nil || got.Job.Type != "report" || got.Catchup != "none" {
		t.Fatalf("get -o json: %+v (%v)", got, err)
	}

	id := strings.TrimSpace(cli(t, "schedules", "trigger", "nightly"))
	if !strings.HasPrefix(id, "sched-nightly-manual-") {
		t.Fatalf("trigger printed %q", id)
	}
	if out := cli(t, "jobs", "get", id); !strings.Contains(out, "echo backup") {
		t.Fatalf("the triggered job:\n%s", out)
	}
	cliFails(t, "409", "schedules", "trigger", "nightly") // overlap skip, and the first run is pending

	if out := cli(t, "schedules", "pause", "nightly"); !strings.Contains(out, "paused:") || !strings.Contains(out, "true") {
		t.Fatalf("pause:\n%s", out)
	}
	cli(t, "schedules", "resume", "nightly")
	cli(t, "schedules", "update", "nightly", "--cron", "@daily", "--", "echo", "v2")
	if err := json.Unmarshal([]byte(cli(t, "schedules", "get", "nightly", "-o", "json")), &got); err != nil || got.Cron != "@daily" || got.Job.Command != "echo v2" || got.Paused || got.Runs != 1 {
		t.Fatalf("after update: %+v (%v)", got, err)
	}
	if out := cli(t, "schedules", "delete", "nightly"); !strings.Contains(out, "deleted nightly") {
		t.Fatalf("delete printed %q", out)
	}
	cliFails(t, "404", "schedules", "get", "nightly")
	cliFails(t, "give the schedule's name", "schedules", "pause")
}
