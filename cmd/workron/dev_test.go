package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/testkit/syncbuf"
)

// TestDevStartsQuietly starts `workron dev` and requires a clean start to
// log no warning of ours (no 503 of the worker's registration while the
// node elects itself; Raft's own election notice aside) and the worker's
// lines to name their component once.
func TestDevStartsQuietly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--http", "127.0.0.1:0", "--data", t.TempDir(), "--concurrency", "1"}, &stdout, &stderr)
	}()
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if !strings.Contains(stderr.String(), "msg=registered") {
			return fmt.Errorf("the worker has not registered yet:\n%s", stderr.String())
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("dev: %v", err)
	}
	for line := range strings.Lines(stderr.String()) {
		if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) && !strings.Contains(line, "component=raft") {
			t.Errorf("a clean start logged: %s", line)
		}
		if strings.Count(line, "component=worker") > 1 {
			t.Errorf("component=worker twice: %s", line)
		}
	}
}

// TestDevHelp: `workron dev -h` lists dev's defaults, not the server's,
// and none of the server flags dev does not take.
func TestDevHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"dev", "-h"}, &stdout, &stderr); exitCode(err, &stderr) != 0 {
		t.Fatalf("dev -h: %v\n%s", err, stderr.String())
	}
	help := stderr.String()
	for _, want := range []string{`(default "127.0.0.1:7070")`, `(default "workron-data")`, `(default "dev")`, "-raft-election-timeout duration\n    \tRaft election timeout (default 100ms)", "-concurrency"} {
		if !strings.Contains(help, want) {
			t.Errorf("dev -h lacks %q:\n%s", want, help)
		}
	}
	for _, unwanted := range []string{"-bootstrap", "-peers", "-join", "-clock-offset", "-raft-fsync-delay", `"127.0.0.1:7001"`} {
		if strings.Contains(help, unwanted) {
			t.Errorf("dev -h shows %q, which dev does not use:\n%s", unwanted, help)
		}
	}
}
