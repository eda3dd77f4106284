package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/testkit/syncbuf"
)

// TestCLIWaitTellsProgress follows `submit --wait` through a failed first
// attempt (scheduled, attempt 1 of 2 failed, retry at …) and the loss of the node it
// asks (it moves to another member), to the job's success.
func TestCLIWaitTellsProgress(t *testing.T) {
	c := clustertest.New(t, 3)
	leader := c.Leader(t)
	follower := c.Followers(t)[0]
	lurl := c.URL(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	post(t, hc, lurl+"/workers/register", wire.Worker{ID: "w1", Queues: []string{"default"}, Resources: wire.Resources{Slots: 1}})
	claim := func() (wire.Job, bool) {
		var res wire.ClaimResponse
		decodeInto(t, post(t, hc, lurl+"/jobs/claim", wire.ClaimRequest{WorkerID: "w1", Queues: []string{"default"}, Shell: true}), &res)
		if len(res.Jobs) != 1 {
			return wire.Job{}, false
		}
		return res.Jobs[0], true
	}

	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"submit", "--server", c.URL(follower), "--wait", "--max-attempts", "2", "--backoff", "1s,1s,0", "--", "work"}, &stdout, &stderr)
	}()
	waitFor := func(says string) { t.Helper(); waitSays(t, &stderr, says) }
	waitFor("job-1: pending")
	j, ok := claim()
	if !ok {
		t.Fatal("no job to claim")
	}
	waitFor("job-1: running, attempt 1 of 2 on w1")
	one := 1
	post(t, hc, lurl+"/jobs/job-1/fail", wire.ReportRequest{Lease: j.Lease, ExitCode: &one, Output: "flaky\n"})
	waitFor("job-1: scheduled, attempt 1 of 2 failed (exit status 1), retry at ")

	c.Kill(t, follower)
	waitFor(fmt.Sprintf("job-1: %s did not answer; asking ", c.URL(follower)))

	clustertest.WaitFor(t, 20*time.Second, func() error {
		if j, ok = claim(); !ok {
			return fmt.Errorf("the retry is not due yet")
		}
		return nil
	})
	zero := 0
	post(t, hc, lurl+"/jobs/job-1/done", wire.ReportRequest{Lease: j.Lease, ExitCode: &zero, Output: "ok\n"})
	if err := <-done; err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "job-1: done after 2 of 2 attempts") || !strings.Contains(stdout.String(), "status:     done") {
		t.Errorf("the end is missing:\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

// TestShellCommand: the words after -- reach the program as typed when the
// job's command runs with sh -c, as a worker runs it; one word is a shell
// command as it is.
func TestShellCommand(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"printf", `[%s]\n`, "a b", "c"}, "[a b]\n[c]\n"},
		{[]string{"printf", `[%s]\n`, "it's", `$HOME`, "*", "", "a\nb"}, "[it's]\n[$HOME]\n[*]\n[]\n[a\nb]\n"},
		{[]string{"printf '%s-' x y | tr - +"}, "x+y+"},
	} {
		cmd := shellCommand(tc.words)
		out, err := exec.Command("sh", "-c", cmd).Output()
		if err != nil || !bytes.Equal(out, []byte(tc.want)) {
			t.Errorf("%q → sh -c %q printed %q (%v), want %q", tc.words, cmd, out, err, tc.want)
		}
	}
	if got := shellCommand([]string{"echo", "hello"}); got != "echo hello" {
		t.Errorf("plain words are quoted: %q", got)
	}
}

// waitSays waits until what the wait printed to out contains what.
func waitSays(t *testing.T, out *syncbuf.Buffer, what string) {
	t.Helper()
	clustertest.WaitFor(t, 20*time.Second, func() error {
		if !strings.Contains(out.String(), what) {
			return fmt.Errorf("wait has not said %q yet:\n%s", what, out.String())
		}
		return nil
	})
}
