package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestListVerbsPage: `workron queues` and `workron schedules ls` list
// every item, following the pages; with --limit they print one page and
// the --cursor of the next, which lists what follows.
func TestListVerbsPage(t *testing.T) {
	c := clustertest.New(t, 1)
	t.Setenv("WORKRON_SERVER", c.URL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(ctx, args, &stdout, &stderr); err != nil {
			t.Fatalf("workron %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	more := regexp.MustCompile(`more: --cursor (\S+)`)
	for i := range 5 {
		cmd("queues", "pause", fmt.Sprintf("q%d", i))
		cmd("schedules", "create", fmt.Sprintf("s%d", i), "--cron", "@daily", "--", "true")
	}
	for _, verb := range [][]string{{"queues"}, {"schedules", "ls"}} {
		prefix := verb[0][:1]
		all := cmd(verb...)
		for i := range 5 {
			if !strings.Contains(all, fmt.Sprintf("%s%d", prefix, i)) {
				t.Errorf("workron %s lists no %s%d:\n%s", verb, prefix, i, all)
			}
		}
		first := cmd(append(verb, "--limit", "2")...)
		m := more.FindStringSubmatch(first)
		if !strings.Contains(first, prefix+"1") || strings.Contains(first, prefix+"2") || m == nil {
			t.Fatalf("workron %s --limit 2:\n%s\nwant %s0, %s1 and a cursor", verb, first, prefix, prefix)
		}
		next := cmd(append(verb, "--limit", "2", "--cursor", m[1])...)
		if !strings.Contains(next, prefix+"2") || !strings.Contains(next, prefix+"3") || strings.Contains(next, prefix+"1") {
			t.Errorf("workron %s --cursor %s:\n%s\nwant %s2 and %s3", verb, m[1], next, prefix, prefix)
		}
	}
}
