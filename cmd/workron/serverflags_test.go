package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server given a value it cannot use refuses to start, says which flag
// or field and why, and leaves nothing behind.
func TestServerRefusesBadTuningFlags(t *testing.T) {
	for _, c := range []struct {
		flag, value, want string
	}{
		{"--gc-min-growth-mb", "-1", "--gc-min-growth-mb must not be negative"},
		{"--snapshot-write-rate-mb", "-1", "--snapshot-write-rate-mb must not be negative"},
		{"--raft-log-level", "loud", `RaftLogLevel must be trace, debug, info, warn, error or off, got "loud"`},
		{"--memory-limit", "-1GiB", `--memory-limit: memlimit: invalid limit: "-1GiB" is negative`},
		{"--memory-limit", "0", `--memory-limit: memlimit: invalid limit: "0" is below 64 MiB`},
		{"--memory-limit", "150%", `--memory-limit: memlimit: invalid limit: "150%" is not a share of memory`},
		{"--memory-limit", "lots", `--memory-limit: memlimit: invalid limit: "lots" is not a size`},
		{"--max-restore-bytes", "0", "--max-restore-bytes must be at least 1048576 (1 MiB), got 0"},
		{"--max-restore-bytes", "-5", "--max-restore-bytes must be at least 1048576 (1 MiB), got -5"},
		{"--max-body-bytes-in-flight", "1048576", "--max-body-bytes-in-flight must be at least the largest body a route takes (33554432 bytes)"},
	} {
		t.Run(strings.TrimPrefix(c.flag, "--"), func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "n1")
			err := runServer(context.Background(), []string{"--id", "n1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--data", data, c.flag, c.value}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("runServer %s %s: %v, want %q", c.flag, c.value, err, c.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("data directory after a refused start: %v, want none", err)
			}
		})
	}
}
