package raftnode

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestHistogram(t *testing.T) {
	h := newHistogram([]float64{1, 10})
	var wg sync.WaitGroup
	for _, v := range []float64{0.5, 1, 3, 10, 11, 100} {
		wg.Go(func() { h.Observe(v) })
	}
	wg.Wait()
	s := h.snapshot()
	// Cumulative: <=1 holds 0.5 and 1; <=10 adds 3 and 10; +Inf adds the rest.
	if s.Count != 6 || s.Sum != 125.5 || len(s.Buckets) != 2 || s.Buckets[0] != (Bucket{1, 2}) || s.Buckets[1] != (Bucket{10, 4}) {
		t.Fatalf("snapshot %+v", s)
	}
	var nilHist *Histogram
	if s := nilHist.snapshot(); s.Count != 0 || s.Buckets != nil {
		t.Fatalf("nil histogram reads %+v", s)
	}
}

func TestRaftLoggerWritesThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	l := raftLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "raft"), "INFO")
	l.Debug("dropped: below the level")
	l.Info("entering follower state", "leader-id", "n1")
	l.Named("snapshot").Error("failed to open", "error", "no such file")
	var lines []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	if m := lines[0]; m["level"] != "INFO" || m["msg"] != "entering follower state" || m["leader-id"] != "n1" || m["component"] != "raft" || m["logger"] != "raft" {
		t.Errorf("first line %v", m)
	}
	if m := lines[1]; m["level"] != "ERROR" || m["error"] != "no such file" || m["logger"] != "raft.snapshot" {
		t.Errorf("second line %v", m)
	}
}
