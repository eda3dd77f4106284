package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/testkit/syncbuf"
)

func TestProgressView(t *testing.T) {
	p40 := &wire.Progress{Percent: 40, Message: "copying files"}
	p100 := &wire.Progress{Percent: 100}
	t.Run("BarRendering", func(t *testing.T) {
		for _, c := range []struct {
			p    *wire.Progress
			want string
		}{
			{&wire.Progress{}, "[........................]   0%"},
			{p40, "[#########...............]  40% copying files"},
			{p100, "[########################] 100%"},
			{&wire.Progress{Percent: 140}, "[########################] 100%"},
		} {
			if got := progressBar(c.p); got != c.want {
				t.Errorf("progressBar(%d %q) = %q, want %q", c.p.Percent, c.p.Message, got, c.want)
			}
		}
	})
	t.Run("OnATerminalOneBarIsRedrawnInPlace", func(t *testing.T) {
		var b bytes.Buffer
		v := &progressView{w: &b, tty: true}
		v.show("job-1", p40)
		v.show("job-1", p40) // unchanged: not drawn again
		v.show("job-1", p100)
		v.endLine()
		v.endLine()
		want := "\r\x1b[Kjob-1: [#########...............]  40% copying files" + "\r\x1b[Kjob-1: [########################] 100%" + "\n"
		if b.String() != want {
			t.Fatalf("drew %q, want %q", b.String(), want)
		}
	})
	t.Run("ElsewherePlainLinesWhenItChanges", func(t *testing.T) {
		var b bytes.Buffer
		v := newProgressView(&b) // not a terminal
		v.show("job-1", nil)
		v.show("job-1", p40)
		v.show("job-1", p40)
		v.show("job-1", p100)
		v.endLine()
		if want := "job-1: 40% copying files\njob-1: 100%\n"; b.String() != want {
			t.Fatalf("wrote %q, want %q", b.String(), want)
		}
	})
}

// TestCLIWaitShowsProgressAndResult: `submit --wait` shows the progress a
// worker's heartbeat gave, then the job with its result; `jobs get` too.
func TestCLIWaitShowsProgressAndResult(t *testing.T) {
	c := clustertest.New(t, 1)
	url := c.URL(c.Leader(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	post(t, hc, url+"/workers/register", wire.Worker{ID: "w1", Queues: []string{"default"}, Resources: wire.Resources{Slots: 1}})

	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"submit", "--server", url, "--wait", "--", "work"}, &stdout, &stderr)
	}()
	says := func(what string) { t.Helper(); waitSays(t, &stderr, what) }
	says("job-1: pending")
	var res wire.ClaimResponse
	decodeInto(t, post(t, hc, url+"/jobs/claim", wire.ClaimRequest{WorkerID: "w1", Shell: true}), &res)
	if len(res.Jobs) != 1 {
		t.Fatal("no job to claim")
	}
	j := res.Jobs[0]
	for _, p := range []wire.ProgressUpdate{{Percent: 40, Message: "copying files"}, {Percent: 90, Message: "checking"}} {
		post(t, hc, url+"/workers/w1/heartbeat", wire.WorkerHeartbeatRequest{Jobs: []wire.JobLease{{JobID: j.ID, Lease: j.Lease, Progress: &p}}})
		says("job-1: " + fmt.Sprint(p.Percent) + "% " + p.Message)
	}
	post(t, hc, url+"/jobs/job-1/done", wire.ReportRequest{Lease: j.Lease, Result: []byte(`{"files":3}`)})
	if err := <-done; err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, stderr.String())
	}
	shows := regexp.MustCompile(`progress: +90% checking\n(.|\n)*result:\n\{\n  "files": 3\n\}\n`)
	want := shows.String()
	if !shows.MatchString(stdout.String()) {
		t.Errorf("submit --wait printed:\n%s\nwant it to end with:\n%s", stdout.String(), want)
	}
	var out, errs bytes.Buffer
	if err := run(ctx, []string{"jobs", "get", "job-1", "--server", url}, &out, &errs); err != nil || !shows.MatchString(out.String()) {
		t.Errorf("jobs get: %v\n%s%s\nwant:\n%s", err, out.String(), errs.String(), want)
	}
}
