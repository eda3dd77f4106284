package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server given a --gc-min-growth-mb it cannot use refuses to start and
// leaves nothing behind.
func TestServerRefusesANegativeGCMinGrowth(t *testing.T) {
	data := filepath.Join(t.TempDir(), "n1")
	err := runServer(context.Background(), []string{"--id", "n1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--data", data, "--gc-min-growth-mb", "-1"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--gc-min-growth-mb must not be negative") {
		t.Fatalf("runServer --gc-min-growth-mb -1: %v, want the flag named", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("data directory after a refused start: %v, want none", err)
	}
}
