package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestCLIRoughEdges drives, as a user would, the verbs a new user tripped
// over (#29) against a one-node cluster: each subtest is one of the edges.
func TestCLIRoughEdges(t *testing.T) {
	c := clustertest.New(t, 1)
	server := c.URL(0)
	t.Setenv("WORKRON_SERVER", server)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	cmd := func(t *testing.T, args ...string) (string, string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(ctx, args, &stdout, &stderr)
		return stdout.String(), stderr.String(), err
	}
	must := func(t *testing.T, args ...string) string {
		t.Helper()
		out, errOut, err := cmd(t, args...)
		if err != nil {
			t.Fatalf("workron %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	getJSON := func(t *testing.T, id string) wire.Job {
		t.Helper()
		var j wire.Job
		decodeInto(t, []byte(must(t, "jobs", "get", id, "-o", "json")), &j)
		return j
	}

	t.Run("HealthAndDigestSkipANodeThatRefuses", func(t *testing.T) {
		// As the default list meets the quick-start cluster: the first
		// node (the dev node's 7070) refuses the connection.
		t.Setenv("WORKRON_SERVER", "http://127.0.0.1:1,"+server)
		id := c.Node(0).ID()
		if out := must(t, "cluster", "health"); !strings.HasPrefix(out, id+": ok, leader") {
			t.Errorf("cluster health = %q, want %s's health", out, id)
		}
		if out := must(t, "digest"); !strings.HasPrefix(out, "node "+id+", applied index ") {
			t.Errorf("digest = %q, want %s's digest", out, id)
		}
		if out := must(t, "cluster", "status"); !strings.Contains(out, "leader: "+id) {
			t.Errorf("cluster status = %q", out) // the other verbs, found the same way
		}
	})

	t.Run("SubmitHelpGivesTheServersDefaults", func(t *testing.T) {
		_, help, err := cmd(t, "submit", "-h")
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("submit -h: %v", err)
		}
		backoff := regexp.MustCompile(`-backoff [^\n]*\n[^\n]*\(default ([^)\s]+)\)`).FindStringSubmatch(help)
		attempts := regexp.MustCompile(`-max-attempts int\n[^\n]*\(default (\d+)\)`).FindStringSubmatch(help)
		if backoff == nil || attempts == nil {
			t.Fatalf("submit -h gives no default backoff or max attempts:\n%s", help)
		}
		// The API shows a job's backoff only when it is not the default.
		id := strings.TrimSpace(must(t, "submit", "--queue", "edges-help", "--backoff", backoff[1], "--", "true"))
		if j := getJSON(t, id); j.Backoff != nil {
			t.Errorf("submit -h says the default backoff is %s; the server's is not: a job given it shows %+v", backoff[1], *j.Backoff)
		}
		id = strings.TrimSpace(must(t, "submit", "--queue", "edges-help", "--", "true"))
		if j := getJSON(t, id); fmt.Sprint(j.MaxAttempts) != attempts[1] {
			t.Errorf("submit -h says max attempts default to %s; the server gave %d", attempts[1], j.MaxAttempts)
		}
	})

	t.Run("JobsGetShowsEachAttemptAndMaxAttemptsCountsRuns", func(t *testing.T) {
		post(t, hc, server+"/workers/register", wire.Worker{ID: "w-edges", Queues: []string{"edges"}, Resources: wire.Resources{Slots: 1}})
		id := strings.TrimSpace(must(t, "submit", "--queue", "edges", "--max-attempts", "2", "--backoff", "0s,0s,0", "--", "make"))
		// fail claims the job as w-edges and fails the attempt.
		fail := func(report wire.ReportRequest) {
			t.Helper()
			var res wire.ClaimResponse
			clustertest.WaitFor(t, 10*time.Second, func() error {
				decodeInto(t, post(t, hc, server+"/jobs/claim", wire.ClaimRequest{WorkerID: "w-edges", Queues: []string{"edges"}, Shell: true}), &res)
				if len(res.Jobs) != 1 {
					return fmt.Errorf("claimed %d jobs", len(res.Jobs))
				}
				return nil
			})
			report.Lease = res.Jobs[0].Lease
			post(t, hc, server+"/jobs/"+id+"/fail", report)
		}
		three := 3
		fail(wire.ReportRequest{ExitCode: &three, Error: "exit status 3"})
		if out := must(t, "jobs", "get", id); !regexp.MustCompile(`(?m)^attempts:\s+1 of 2$`).MatchString(out) {
			t.Errorf("jobs get after the first attempt:\n%s\nwant attempts: 1 of 2", out)
		}
		fail(wire.ReportRequest{Error: "disk\tfull\nat /var"})
		out := must(t, "jobs", "get", id)
		for _, want := range []string{
			`(?m)^status:\s+failed$`,
			`(?m)^attempts:\s+2 of 2$`,
			`(?m)^attempt history:$`,
			`(?m)^  ATTEMPT\s+WORKER\s+STARTED\s+ENDED\s+OUTCOME\s+EXIT\s+ERROR$`,
			`(?m)^  1\s+w-edges\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+failed\s+3\s+exit status 3$`,
			`(?m)^  2\s+w-edges\s+\S+ \S+\s+\S+ \S+\s+failed\s+-\s+disk\\tfull\\nat /var$`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("jobs get of a job that failed twice: no line matches %s\n%s", want, out)
			}
		}
		// max_attempts 2 ran it twice, no more; max_retries, the v0 worker
		// API's name for it, says the same.
		if j := getJSON(t, id); j.Status != wire.StatusFailed || len(j.AttemptHistory) != 2 || j.MaxAttempts != 2 || j.MaxRetries != 2 {
			t.Errorf("after two failures: status %s, %d attempts, max_attempts %d, max_retries %d; want failed, 2, 2, 2",
				j.Status, len(j.AttemptHistory), j.MaxAttempts, j.MaxRetries)
		}
	})

	t.Run("JobsGetShowsTheJournal", func(t *testing.T) {
		id := strings.TrimSpace(must(t, "submit", "--queue", "edges-steps", "--", "true"))
		var res wire.ClaimResponse
		clustertest.WaitFor(t, 10*time.Second, func() error {
			decodeInto(t, post(t, hc, server+"/jobs/claim", wire.ClaimRequest{WorkerID: "w-steps", Queues: []string{"edges-steps"}, Shell: true}), &res)
			if len(res.Jobs) != 1 {
				return fmt.Errorf("claimed %d jobs", len(res.Jobs))
			}
			return nil
		})
		body := fmt.Sprintf(`{"lease":%d,"result":"ch_1","duration_ms":1500,"attempts":2}`, res.Jobs[0].Lease)
		req, _ := http.NewRequest(http.MethodPut, server+"/jobs/"+id+"/steps/charge", strings.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT step: %v %v", resp, err)
		}
		resp.Body.Close()
		out := must(t, "jobs", "get", id)
		for _, want := range []string{
			`(?m)^steps: 1 recorded, 12 bytes$`,
			`(?m)^  STEP\s+STATUS\s+TRIES\s+ATTEMPT\s+RECORDED\s+TOOK\s+SIZE$`,
			`(?m)^  charge\s+ok\s+2\s+1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+1\.5s\s+6$`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("jobs get of a job with a step: no line matches %s\n%s", want, out)
			}
		}
	})

	t.Run("WorkersShowResourcesAndTags", func(t *testing.T) {
		post(t, hc, server+"/workers/register", wire.Worker{ID: "w-gpu", Queues: []string{"gpu"}, Tags: []string{"a100", "evil\x1b]0;pwned\x07\tx"},
			Resources: wire.Resources{Slots: 2, CPUMillis: 2500, MemoryMB: 8192, VRAMMB: 24000}})
		out := must(t, "workers")
		if !regexp.MustCompile(`(?m)^ID\s+STATUS\s+RUNNING\s+SLOTS\s+RESOURCES\s+TAGS\s+QUEUES\s+LAST HEARTBEAT$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^w-gpu\s+active\s+0\s+2\s+cpu=2\.5,mem=8G,vram=24000M\s+a100,evil\\x1b\]0;pwned\\x07\\tx\s+gpu\s+\S+ \S+$`).MatchString(out) {
			t.Errorf("workers:\n%s\nwant w-gpu's resources and its tags, escaped, on its line", out)
		}
	})
}

// TestWorkerResourcesText: what a worker offers, as the workers table
// shows it.
func TestWorkerResourcesText(t *testing.T) {
	for _, tc := range []struct {
		in   wire.Resources
		want string
	}{
		{wire.Resources{}, "-"},
		{wire.Resources{Slots: 4}, "-"},
		{wire.Resources{CPUMillis: 4000, MemoryMB: 8192}, "cpu=4,mem=8G"},
		{wire.Resources{CPUMillis: 250, MemoryMB: 1536, VRAMMB: 81920}, "cpu=0.25,mem=1536M,vram=80G"},
	} {
		if got := resourcesText(tc.in); got != tc.want {
			t.Errorf("resourcesText(%+v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
