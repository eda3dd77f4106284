package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	wnode "github.com/workron/workron/node"
)

// TestJobsListAndCountPageThroughTheScanBudget: with a server that examines
// 5 jobs a page and 7 a count, `workron jobs ls` prints full pages (not an
// early one with a bare cursor, #29) and `workron jobs count` the exact
// figure, however many requests that takes.
func TestJobsListAndCountPageThroughTheScanBudget(t *testing.T) {
	c := clustertest.New(t, 1, clustertest.WithConfig(func(_ int, nc *wnode.Config) { nc.API.ListScan, nc.API.CountScan = 5, 7 }))
	t.Setenv("WORKRON_SERVER", c.URL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := clientSecurity{}
	cl, err := cs.newClient([]string{c.URL(0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reqs := make([]wire.SubmitRequest, 20)
	for i := range reqs {
		reqs[i] = wire.SubmitRequest{Command: fmt.Sprintf("echo %d", i), Queue: fmt.Sprintf("q%d", i%2)}
		if i < 2 {
			reqs[i].Metadata = map[string]string{"tenant": "needle"}
		}
	}
	jobs, err := cl.SubmitBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := runClient(ctx, args[0], args[1:], &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	cmd := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := run(t, args...)
		if err != nil {
			t.Fatalf("workron %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	more := regexp.MustCompile(`more: --cursor (\S+)`)

	t.Run("AListGoesOnUntilThePageIsFullOrTheJobsEnd", func(t *testing.T) {
		out := cmd(t, "jobs", "ls", "--metadata", "tenant=needle")
		if !strings.Contains(out, jobs[0].ID) || !strings.Contains(out, jobs[1].ID) || more.MatchString(out) {
			t.Fatalf("jobs ls --metadata tenant=needle:\n%s\nwant both needles and no cursor", out)
		}
	})

	t.Run("AFullPageGivesTheCursorOfTheNext", func(t *testing.T) {
		out := cmd(t, "jobs", "ls", "--filter", `queue == "q0"`, "--limit", "4")
		m := more.FindStringSubmatch(out)
		if m == nil || strings.Count(out, "q0") != 4 || !strings.Contains(out, jobs[18].ID) || !strings.Contains(out, jobs[12].ID) {
			t.Fatalf("jobs ls --filter 'queue == \"q0\"' --limit 4:\n%s\nwant jobs 18 to 12 of q0 and a cursor", out)
		}
		next := cmd(t, "jobs", "ls", "--filter", `queue == "q0"`, "--limit", "4", "--cursor", m[1])
		if strings.Count(next, "q0") != 4 || !strings.Contains(next, jobs[10].ID) || !strings.Contains(next, jobs[4].ID) || strings.Contains(next, jobs[12].ID) {
			t.Fatalf("the next page:\n%s\nwant jobs 10 to 4 of q0", next)
		}
	})

	t.Run("ACountIsExact", func(t *testing.T) {
		out := cmd(t, "jobs", "count", "--filter", `queue == "q0" or metadata.tenant == needle`)
		if !regexp.MustCompile(`(?m)^pending\s+11$`).MatchString(out) || !regexp.MustCompile(`(?m)^total\s+11$`).MatchString(out) {
			t.Fatalf("jobs count:\n%s\nwant 11 pending, 11 in all", out)
		}
		js := cmd(t, "jobs", "count", "-o", "json", "--queue", "q1", "--status", "pending")
		var n wire.JobCount
		if err := json.Unmarshal([]byte(js), &n); err != nil {
			t.Fatalf("jobs count -o json: %v\n%s", err, js)
		}
		// The status × queue index gives the 10 jobs of q1 alone (store/index.go).
		if n.Count != 10 || !n.Exact || n.Scanned != 10 || n.ByStatus["pending"] != 10 {
			t.Errorf("jobs count -o json: %+v, want an exact 10 pending, 10 examined", n)
		}
	})

	t.Run("ABadFilterSaysWhere", func(t *testing.T) {
		for _, verb := range []string{"ls", "count"} {
			out, err := run(t, "jobs", verb, "--filter", `queue == q0 and staus == failed`)
			if err == nil || !strings.Contains(err.Error(), `filter: at column 17: unknown field "staus"`) {
				t.Errorf("jobs %s with a bad filter: %v\n%s\nwant the field, the column and what is wrong", verb, err, out)
			}
		}
	})
}
