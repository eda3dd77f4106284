package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

func TestEscapeControls(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, é 日本", "plain text, é 日本"},
		{"lines\nand\ttabs", "lines\nand\ttabs"},
		{"\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`}, // OSC 52: write the clipboard
		{"\x1b]0;title\x1b\\", `\x1b]0;title\x1b\`},          // set the window title
		{"ok\rFAKE\b\x7f", `ok\x0dFAKE\x08\x7f`},             // overwrite the line
		{"\u009b31m", `\u009b31m`},                           // C1 CSI
		{"abc\u202edef\u2066", `abc\u202edef\u2066`},         // bidi overrides
		{"bad \xff\xfe byte", `bad \xff\xfe byte`},           // not UTF-8
		{"\x00", `\x00`},
	} {
		if got := escapeControls(tc.in); got != tc.want {
			t.Errorf("escapeControls(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestJobsPrintEscapes: `jobs get` and `jobs ls` show a job's command,
// progress, output, result, error and attempt history with their control characters
// escaped, as do the errors a server sends; -o json gives them exactly.
func TestJobsPrintEscapes(t *testing.T) {
	const evil = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\r"
	job := wire.Job{ID: "job-1", Status: wire.StatusRunning, Queue: "default", Command: "echo " + evil, WorkerID: "w" + evil,
		Progress: &wire.Progress{Percent: 40, Message: "step " + evil}, Output: "out " + evil + "\n", LastError: "err " + evil,
		Result: json.RawMessage(`{"k":"\u001b]52;c;eA==\u0007"}`), MaxAttempts: 3, CreatedAt: time.Unix(0, 0),
		AttemptHistory: []wire.Attempt{{Attempt: 1, WorkerID: "w" + evil, Status: "failed" + evil, Error: "err " + evil}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/jobs/job-1":
			_ = json.NewEncoder(w).Encode(job)
		case r.URL.Path == "/jobs":
			_ = json.NewEncoder(w).Encode(wire.JobList{Jobs: []wire.Job{job}})
		default:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(wire.Error{Error: "no job " + evil, Code: wire.CodeNotFound})
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := runClient(ctx, args[0], append(args[1:], "--server", srv.URL), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	raw := func(s string) bool { return strings.ContainsAny(s, "\x1b\x07\r") }
	for _, args := range [][]string{{"jobs", "get", "job-1"}, {"jobs", "ls"}} {
		out, errOut, err := run(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if raw(out) || raw(errOut) || !strings.Contains(out, `\x1b]52;c;`) {
			t.Errorf("%v printed raw control characters, or none escaped:\n%q\n%q", args, out, errOut)
		}
	}
	var got wire.Job
	out, _, err := run("jobs", "get", "job-1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Command != job.Command || got.Output != job.Output ||
		got.Progress == nil || got.Progress.Message != job.Progress.Message || got.LastError != job.LastError {
		t.Errorf("-o json does not give the job as it is (%v):\n%s", err, out)
	}
	var stderr bytes.Buffer
	_, _, err = run("jobs", "get", "job-2")
	exitCode(err, &stderr)
	if raw(stderr.String()) || !strings.Contains(stderr.String(), `\x1b]52`) {
		t.Errorf("a server's error printed raw: %q", stderr.String())
	}
}
