package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestCLIGolden runs the client verbs against a three-node cluster, through
// a follower, the way a user would, and compares the whole session (what
// each command printed on stdout and stderr, and its exit code) with
// testdata/cli.golden. Times, addresses and Raft indexes are replaced by
// placeholders; `go test ./cmd/workron -run CLIGolden -update` rewrites the
// file.
func TestCLIGolden(t *testing.T) {
	c := clustertest.New(t, 3)
	follower := c.Followers(t)[0]
	server := c.URL(follower)
	t.Setenv("WORKRON_SERVER", server)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)

	s := &session{t: t, ctx: ctx}
	tmp := t.TempDir()
	s.placeholders = append(s.placeholders, tmp, "<tmp>")
	for i := range c.Len() {
		s.placeholders = append(s.placeholders, c.URL(i), fmt.Sprintf("<%s-http>", c.Node(i).ID()),
			c.Node(i).Raft().RaftAddr(), fmt.Sprintf("<%s-raft>", c.Node(i).ID()))
	}

	// A worker that the test drives by hand, so every outcome is fixed.
	post(t, hc, server+"/workers/register", wire.Worker{ID: "w1", Queues: []string{"default", "reports"}, Resources: wire.Resources{Slots: 4}})
	claim := func(queue string) wire.Job {
		t.Helper()
		var res wire.ClaimResponse
		decodeInto(t, post(t, hc, server+"/jobs/claim", wire.ClaimRequest{WorkerID: "w1", Queues: []string{queue}, Shell: true}), &res)
		if len(res.Jobs) != 1 {
			t.Fatalf("claim from %s: %d jobs", queue, len(res.Jobs))
		}
		return res.Jobs[0]
	}

	s.note("Submit, list and inspect.")
	s.run(0, "submit", "--", "echo", "hello")
	s.run(0, "submit", "--queue", "reports", "--priority", "5", "--max-attempts", "1", "--env", "A=1", "--", "make", "report")
	s.run(0, "submit", "--depends-on", "job-1", "--metadata", "team=data", "--", "echo", "after")
	s.run(0, "jobs", "ls")
	s.run(0, "jobs", "ls", "--status", "blocked", "-o", "json")
	s.run(0, "jobs", "ls", "--queue", "reports", "--limit", "1")
	s.run(0, "jobs", "get", "job-2")

	s.note("w1 runs job-2, which fails with exit code 3: wait exits with it.")
	j2 := claim("reports")
	zero, three := 0, 3
	post(t, hc, server+"/jobs/job-2/fail", wire.ReportRequest{Lease: j2.Lease, ExitCode: &three, Output: "boom\n"})
	s.run(3, "jobs", "wait", "job-2")
	s.run(0, "jobs", "retry", "job-2")
	s.run(0, "jobs", "cancel", "job-2")

	s.note("wait follows job-1, running on w1, until w1 reports it done, and exits 0; it tells each change on stderr.")
	j1 := claim("default")
	before := requests(t, hc, server, "GET /jobs/{id}")
	waited := make(chan string, 1)
	go func() { waited <- s.capture(0, "jobs", "wait", "job-1") }()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if n := requests(t, hc, server, "GET /jobs/{id}"); n <= before {
			return fmt.Errorf("wait has not looked at the job yet")
		}
		return nil
	})
	post(t, hc, server+"/jobs/job-1/done", wire.ReportRequest{Lease: j1.Lease, ExitCode: &zero, Output: "hello\n"})
	s.write(<-waited)
	s.run(0, "jobs", "get", "job-3", "-o", "json")

	s.note("Workers, queues and the cluster.")
	s.run(0, "workers")
	s.run(0, "queues", "pause", "later") // no job uses it yet
	s.run(0, "queues")
	s.run(0, "cluster", "status")
	s.run(0, "cluster", "join", "--id", "n4", "--raft", "127.0.0.1:1", "--http", "http://127.0.0.1:1")
	c.Converged(t, 5*time.Second) // the follower asked has n4's address too
	s.run(0, "cluster", "status")
	s.run(0, "cluster", "remove", "n4")
	c.Converged(t, 5*time.Second)
	s.run(0, "cluster", "status", "--server", "http://127.0.0.1:1,"+c.URL(c.Leader(t)))

	s.note("Typed jobs, resources, tags and gangs.")
	s.run(0, "submit", "--type", "resize", "--payload", `{"width":64}`, "--queue", "typed")
	s.run(0, "submit", "--tags", "gpu,a100", "--vram-mb", "8000", "--memory-mb", "512", "--queue", "gpu", "--", "train")
	s.run(0, "jobs", "get", "job-5", "-o", "json")
	s.run(0, "submit", "--gang-size", "2", "--queue", "gang", "--", "mpirun", "step")

	s.note("--env and --metadata repeat and keep values whole; the words after -- reach the job as typed.")
	s.run(0, "submit", "--env", "LIST=a,b,c", "--env", "A=1", "--metadata", "team=data", "--metadata", "k=v=w", "--queue", "misc", "--", "printf", `[%s]\n`, "a b", "c")
	s.run(0, "jobs", "get", "job-8", "-o", "json")
	s.run(0, "jobs", "ls", "--metadata", "team=data", "--metadata", "k=v=w")

	s.note("Every field has a flag: run_at, backoff, retention, unique_for.")
	s.run(0, "submit", "--run-at", "2030-01-02T03:04:05Z", "--backoff", "2s,1m,0.1", "--retention", "1h", "--idempotency-key", "k1", "--unique-for", "10m", "--queue", "misc", "--", "true")
	s.run(0, "jobs", "get", "job-9", "-o", "json")

	s.note("A batch from a file (or - for stdin); the server warns about fields it does not know.")
	batch := filepath.Join(tmp, "batch.json")
	if err := os.WriteFile(batch, []byte(`[{"command":"fetch","queue":"misc"},{"command":"build","queue":"misc","depends_on":["$0"],"priorty":5}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.run(0, "submit", "--batch", batch)
	s.run(0, "jobs", "cancel", "job-10", "--no-cascade")
	s.run(0, "jobs", "ls", "--queue", "misc", "--limit", "2")
	s.run(0, "queues", "get", "misc")
	s.run(0, "jobs", "cancel", "-h")

	s.note("A gang, the digest, and a wait that gives up.")
	s.run(0, "gangs", "get", "gang-6")
	s.run(0, "digest", "--server", c.URL(c.Leader(t)))
	s.run(0, "cluster", "health", "--server", c.URL(c.Leader(t)))
	s.run(1, "jobs", "wait", "job-5", "--timeout", "1ms")

	s.note("An update changes only what it names: a paused schedule stays paused, overlap stays skip.")
	s.run(0, "schedules", "create", "tidy", "--cron", "@daily", "--overlap", "skip", "--queue", "misc", "--", "echo", "tidy")
	s.run(0, "schedules", "pause", "tidy")
	s.run(0, "schedules", "update", "tidy", "--cron", "@hourly")

	s.note("Bulk actions: count, confirm (--yes), follow to the end; list, get, stop.")
	s.run(0, "jobs", "priority", "--queue", "misc", "--status", "pending", "--priority", "3", "--yes")
	s.run(0, "jobs", "cancel", "--queue", "misc", "--metadata", "team=data", "--yes")
	s.run(0, "jobs", "bulk", "ls")
	s.run(0, "jobs", "bulk", "get", "2", "-o", "json")
	s.run(0, "jobs", "bulk", "stop", "2")
	s.run(1, "jobs", "delete")
	s.run(1, "jobs", "retry", "--queue", "misc", "job-1")
	s.run(0, "jobs", "retry", "--filter", `status == "cancelled" and queue == "misc"`, "--yes")
	s.run(1, "jobs", "retry", "--filter", "staus == failed", "--yes")
	s.run(1, "jobs", "bulk", "get", "99")

	s.note("Errors go to stderr with a non-zero exit code.")
	s.run(1, "jobs", "get", "job-99")
	s.run(1, "jobs", "cancel", "job-1")
	s.run(1, "jobs", "retry", "job-3")
	s.run(1, "jobs")
	s.run(1, "submit", "--queue", "q")
	s.run(1, "submit", "--", "")
	s.run(1, "submit", "--type", "resize", "--", "echo")
	s.run(1, "submit", "--payload", "{}", "--", "echo")
	s.run(1, "submit", "--type", "resize", "--payload", "{nope")
	s.run(1, "queues", "-o", "yaml")
	s.run(1, "cluster", "remove", "n9")
	s.run(1, "queues", "pause", "bad name")
	s.run(1, "workers", "rm", "w1") // active
	s.run(1, "workers", "rm")
	s.run(1, "schedules", "get", "nope")
	s.run(1, "schedules", "create", "bad", "--cron", "every day", "--", "true")
	s.run(1, "workers", "--server", "http://127.0.0.1:1")

	golden(t, filepath.Join("testdata", "cli.golden"), s.out.String())
}

// session runs CLI commands and keeps a normalised transcript of them.
type session struct {
	t            *testing.T
	ctx          context.Context
	placeholders []string // old, new pairs
	out          bytes.Buffer
}

func (s *session) note(text string) { fmt.Fprintf(&s.out, "\n# %s\n", text) }

// run runs one command, requires its exit code, and adds it to the
// transcript.
func (s *session) run(code int, args ...string) {
	s.t.Helper()
	s.write(s.capture(code, args...))
}

// capture runs one command as main would (exit code and stderr included)
// and returns its normalised transcript entry; safe from any goroutine.
func (s *session) capture(code int, args ...string) string {
	var stdout, stderr bytes.Buffer
	got := exitCode(run(s.ctx, args, &stdout, &stderr), &stderr)
	var b strings.Builder
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if a == "" || strings.ContainsAny(a, " \"'") {
			quoted[i] = strconv.Quote(a)
		}
	}
	fmt.Fprintf(&b, "$ workron %s\n", strings.NewReplacer(s.placeholders...).Replace(strings.Join(quoted, " ")))
	b.WriteString(s.normalise(stdout.String()))
	for line := range strings.Lines(s.normalise(stderr.String())) {
		b.WriteString("stderr: " + line)
	}
	if got != 0 {
		fmt.Fprintf(&b, "exit %d\n", got)
	}
	if got != code {
		fmt.Fprintf(&b, "!!! want exit %d\n", code)
	}
	return b.String()
}

func (s *session) write(entry string) {
	s.t.Helper()
	if strings.Contains(entry, "!!! want exit") {
		s.t.Errorf("unexpected exit code:\n%s", entry)
	}
	s.out.WriteString(entry)
}

var (
	reDateTime = regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`)
	reLease    = regexp.MustCompile(`"lease": \d+`)
	reApplied  = regexp.MustCompile(`((?:applied|commit) index:? |term )\d+`)
	reDigest   = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	reTable    = regexp.MustCompile(`\S {2,}\S`)
	// An APPLIED cell: a Raft index after a node's health.
	reAppliedCell = regexp.MustCompile(`(  (?:ok|no_leader)  +)\d+`)
)

// normalise replaces what changes from run to run: addresses, times, Raft
// indexes (leases are indexes too), then re-aligns tables whose columns
// those changed.
func (s *session) normalise(text string) string {
	text = strings.NewReplacer(s.placeholders...).Replace(text)
	text = reDateTime.ReplaceAllString(text, "<time>")
	text = reLease.ReplaceAllString(text, `"lease": <index>`)
	text = reApplied.ReplaceAllString(text, "${1}<index>")
	text = reDigest.ReplaceAllString(text, "<digest>")
	text = reAppliedCell.ReplaceAllString(text, "${1}<index>")
	if strings.HasPrefix(text, "{") || strings.HasPrefix(text, "[") {
		return text
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for line := range strings.Lines(text) {
		if reTable.MatchString(line) {
			line = regexp.MustCompile(` {2,}`).ReplaceAllString(line, "\t")
		}
		io.WriteString(tw, line)
	}
	tw.Flush()
	return b.String()
}

// golden compares got with the file, or rewrites the file under -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs from line %d (run with -update to accept):\nwant: %q\ngot:  %q\n\nwhole output:\n%s", path, i+1, w, g, got)
		}
	}
}

// post sends a JSON body and requires a 2xx reply, which it returns.
func post(t *testing.T, hc *http.Client, url string, body any) []byte {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: HTTP %d %s", url, resp.StatusCode, out)
	}
	return out
}

func decodeInto(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, data, err)
	}
}

// requests reads from the node's /metrics how many requests it has served
// on a route with status 200.
func requests(t *testing.T, hc *http.Client, server, route string) int {
	t.Helper()
	resp, err := hc.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	prefix := fmt.Sprintf("workron_http_requests_total{route=%q,status=\"200\"} ", route)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// TestJobShowsItsTraceID: `jobs get` prints the trace id of a job's
// traceparent, what a tracing backend finds its trace by, and no trace row
// for a job without one.
func TestJobShowsItsTraceID(t *testing.T) {
	var out bytes.Buffer
	c := &cli{out: &out}
	c.printJob(&wire.Job{ID: "job-1", Status: wire.StatusDone, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if !regexp.MustCompile(`(?m)^trace:\s+4bf92f3577b34da6a3ce929d0e0e4736$`).MatchString(out.String()) {
		t.Errorf("jobs get of a traced job:\n%s", out.String())
	}
	out.Reset()
	c.printJob(&wire.Job{ID: "job-2", Status: wire.StatusDone})
	if strings.Contains(out.String(), "trace") {
		t.Errorf("jobs get of a job without a trace:\n%s", out.String())
	}
}
