package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/testkit/syncbuf"
)

// TestDevStartsQuietly starts `workron dev` and requires a clean start to
// log no warning of ours (no 503 of the worker's registration while the
// node elects itself; Raft's own election notice aside) and the worker's
// lines to name their component once. The host's disk is not the subject
// (a CI machine's may be under the disk-low threshold, which rightly warns):
// --disk-low-free 0.
func TestDevStartsQuietly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--http", "127.0.0.1:0", "--data", t.TempDir(), "--concurrency", "1", "--disk-low-free", "0"}, &stdout, &stderr)
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

// TestDevRefusesWhatAWebPageSends runs `workron dev` itself (no tokens,
// bound to loopback, its in-process worker running jobs) and sends what a
// hostile web page can make a browser send: a text/plain and a form body
// with a cross-site Origin, a request with a forged Host (DNS rebinding)
// and an image-style GET /jobs/next. Each is refused and no job is created;
// the same JSON submit without those headers is served. (The real-browser
// version of this is api/ui's TestHostilePageCannotUseANodeWithoutTokens.)
func TestDevRefusesWhatAWebPageSends(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--http", "127.0.0.1:0", "--data", t.TempDir(), "--concurrency", "1", "--disk-low-free", "0"}, &stdout, &stderr)
	}()
	var base string
	clustertest.WaitFor(t, 30*time.Second, func() error {
		_, rest, ok := strings.Cut(stdout.String(), "API on ")
		if !ok || !strings.Contains(stderr.String(), "msg=registered") {
			return fmt.Errorf("dev not serving yet:\n%s", stderr.String())
		}
		base, _, _ = strings.Cut(rest, ",")
		return nil
	})
	hc := &http.Client{Timeout: 10 * time.Second}
	send := func(method, path, ctype, host, body string, h map[string]string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	job := `{"command":"echo pwned","queue":"evil"}`
	cross := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	for name, c := range map[string]struct {
		method, path, ctype, host, body string
		h                               map[string]string
	}{
		"TextPlainCrossSite": {http.MethodPost, "/jobs", "text/plain", "", job, cross},
		"FormCrossSite":      {http.MethodPost, "/jobs", "application/x-www-form-urlencoded", "", job, cross},
		"JSONCrossSite":      {http.MethodPost, "/jobs", "application/json", "", job, cross},
		"DNSRebinding":       {http.MethodPost, "/jobs", "application/json", "evil.example:7070", job, nil},
		"ImageClaim":         {http.MethodGet, "/jobs/next?worker_id=img&queue=evil", "", "", "", cross},
	} {
		if got := send(c.method, c.path, c.ctype, c.host, c.body, c.h); got/100 == 2 {
			t.Errorf("%s: %d, want it refused", name, got)
		}
	}
	var list struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	resp, err := hc.Get(base + "/jobs?queue=evil")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Jobs) != 0 {
		t.Errorf("queue evil holds %d jobs after the hostile requests (err %v)", len(list.Jobs), err)
	}
	if got := send(http.MethodPost, "/jobs", "application/json", "", `{"command":"true","queue":"fine"}`, nil); got != http.StatusCreated {
		t.Errorf("a plain JSON submit: %d, want 201", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("dev: %v", err)
	}
}
