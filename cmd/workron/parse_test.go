package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// TestParseKeepsWhatFollowsTheTerminator: after "--" every argument is the
// command's, also those that look like flags, wherever the "--" stands.
func TestParseKeepsWhatFollowsTheTerminator(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		wantPos   []string
		wantQueue string
	}{
		{[]string{"--", "sh", "-c", "exit 3"}, []string{"sh", "-c", "exit 3"}, "default"},
		{[]string{"--queue", "q1", "--", "echo", "-n", "hi"}, []string{"echo", "-n", "hi"}, "q1"},
		{[]string{"job-1", "--queue", "q1", "--", "-x"}, []string{"job-1", "-x"}, "q1"},
		{[]string{"job-1", "--", "--queue", "q2"}, []string{"job-1", "--queue", "q2"}, "default"},
		{[]string{"job-1", "--queue", "q1", "job-2"}, []string{"job-1", "job-2"}, "q1"},
		{[]string{"--", "--"}, []string{"--"}, "default"},
		{nil, nil, "default"},
	} {
		fs := flag.NewFlagSet("submit", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		queue := fs.String("queue", "default", "")
		pos, err := parse(fs, tc.args)
		if err != nil {
			t.Errorf("parse(%q): %v", tc.args, err)
			continue
		}
		if !slices.Equal(pos, tc.wantPos) || *queue != tc.wantQueue {
			t.Errorf("parse(%q) = %q, queue %q; want %q, queue %q", tc.args, pos, *queue, tc.wantPos, tc.wantQueue)
		}
	}
	fs := flag.NewFlagSet("submit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parse(fs, []string{"echo", "-c"}); err == nil {
		t.Error(`parse("echo -c") without "--": want the unknown flag's error`)
	}
}
