//go:build unix

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
	"github.com/workron/workron/worker/client"
)

// Durable jobs (issue #31): jobs whose handler runs several journaled steps
// (worker.Job.Step), run by `chaosworker` processes (cmd/chaosworker) that
// the harness SIGKILLs, cuts off the network and restarts like the real
// workers. Each step's function appends a line to the run's ledger when it
// runs, and the handler another when the step's record came back; the
// checks (durcheck.go) hold the ledger against the journals the cluster
// kept.

// durableQueue is the queue of the durable jobs and their children,
// served only by the chaosworker processes; durableType and
// durableChildType are their job types; durableEvent is the name of the
// events their waits wait for (the key is the job's idempotency key).
const (
	durableQueue     = "chaos-durable"
	durableType      = "durable"
	durableChildType = "durable-child"
	durableEvent     = "chaos.event"
)

// How a durable job's event is sent (durableSpec.event).
const (
	eventBefore = "before" // at once after the submit: mostly before the wait is registered
	eventAfter  = "after"  // 2-5 s after the submit: mostly while the job waits
	eventNone   = "none"   // never: the wait times out
)

// Wait timeouts: a job that gets no event waits a moment; one that gets
// an event waits longer than any clock jump (an hour) can cut short, so
// that only a lost event leaves it waiting (until the rescue event the
// harness sends after healing, which the check then sees it got).
const (
	waitNoEventTimeout = 1500 * time.Millisecond
	waitEventTimeout   = 3 * time.Hour
)

// durableSpec is one durable job of the load. Its handler sleeps stepMS
// in each run step (a window for the kills), and in its first attempt
// fails inside step failRun after the run (nothing recorded: the step
// runs again) or right after step failAfter's record (the next attempt
// must replay it, not run it). It sleeps sleepMS, then waits for its
// event, sent as event says.
type durableSpec struct {
	key       string
	stepMS    int
	failRun   string
	failAfter string
	sleepMS   int
	event     string
}

func (s durableSpec) request() wire.SubmitRequest {
	attempts := 15 // kills and planned failures eat attempts; leave room
	wait := waitEventTimeout
	if s.event == eventNone {
		wait = waitNoEventTimeout
	}
	md := map[string]string{"step_ms": strconv.Itoa(s.stepMS), "sleep_ms": strconv.Itoa(s.sleepMS),
		"event": s.event, "event_key": s.key, "wait_ms": strconv.FormatInt(wait.Milliseconds(), 10)}
	if s.failRun != "" {
		md["fail_run"] = s.failRun
	}
	if s.failAfter != "" {
		md["fail_after"] = s.failAfter
	}
	return wire.SubmitRequest{Queue: durableQueue, Type: durableType, IdempotencyKey: s.key, Metadata: md,
		MaxAttempts: &attempts, Timeout: "30s", Backoff: &wire.Backoff{Base: "100ms", Max: "1s", Jitter: 0.3}}
}

// childRequest is the child job a durable job invokes.
func childRequest(parent string) wire.SubmitRequest {
	attempts := 15
	return wire.SubmitRequest{Queue: durableQueue, Type: durableChildType, Metadata: map[string]string{"parent": parent},
		MaxAttempts: &attempts, Timeout: "30s", Backoff: &wire.Backoff{Base: "100ms", Max: "1s", Jitter: 0.3}}
}

// randomDurableSpec draws durable job number i.
func randomDurableSpec(rng *rand.Rand, i int) durableSpec {
	s := durableSpec{key: "d" + strconv.Itoa(i), stepMS: 50 + rng.IntN(250), sleepMS: 300 + rng.IntN(1200)}
	keys := runKeys()
	if rng.IntN(4) == 0 {
		s.failRun = keys[rng.IntN(len(keys))]
	}
	if rng.IntN(4) == 0 {
		s.failAfter = keys[rng.IntN(len(keys))]
	}
	s.event = []string{eventBefore, eventAfter, eventAfter, eventNone}[rng.IntN(4)]
	return s
}

// eventPayload is what the harness sends as a durable job's event: the
// job's key, and 1 for its event, 2 for the rescue sent after healing.
type eventPayload struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// childResult is a child job's result: which run of it set it.
type childResult struct {
	Child string `json:"child"`
	Run   string `json:"run"`
}

// ledger appends lines to the ledger file. Every line is one write(2) to a
// file opened O_APPEND, so the lines of several processes interleave
// whole, in the order they were written, and a line written before a
// SIGKILL stays (it is in the kernel's page cache).
type ledger struct {
	mu sync.Mutex
	f  *os.File
}

func openLedger(path string) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the ledger: %w", err)
	}
	return &ledger{f: f}, nil
}

func (l *ledger) write(line ledgerLine) error {
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write the ledger: %w", err)
	}
	return nil
}

func (l *ledger) close() error { return l.f.Close() }

// leaseTap is the chaosworker's HTTP transport: it passes every request on
// and notes the lease of each job a claim reply hands out, which the
// handler does not otherwise see.
type leaseTap struct {
	base http.RoundTripper
	mu   sync.Mutex
	got  map[string]claimedAttempt // by job id: the latest claim of it
}

type claimedAttempt struct {
	lease    uint64
	attempts int
}

func (t *leaseTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.URL.Path != "/jobs/claim" || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var cr wire.ClaimResponse
	if json.Unmarshal(body, &cr) == nil {
		t.mu.Lock()
		for _, j := range cr.Jobs {
			t.got[j.ID] = claimedAttempt{lease: j.Lease, attempts: j.Attempts}
		}
		t.mu.Unlock()
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// lease is the lease of job id's attempt number attempt, as the latest
// claim reply gave it; 0 when that reply was of another attempt.
func (t *leaseTap) lease(id string, attempt int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.got[id]; ok && c.attempts == attempt {
		return c.lease
	}
	return 0
}

// durableWorker runs the durable jobs' handler.
type durableWorker struct {
	id         string
	led        *ledger
	tap        *leaseTap
	runs       atomic.Uint64
	plantRerun bool // see DurableWorkerConfig
}

// handle is the durable job's handler: the calls of durableCalls, each
// run step written to the ledger when its function runs and when its
// record came back, each parking call when it parked and when it
// returned; then an end line with what each run step returned.
func (d *durableWorker) handle(ctx context.Context, job *worker.Job) error {
	lease := d.tap.lease(job.ID, job.Attempt)
	stepMS, _ := strconv.Atoi(job.Metadata["step_ms"])
	seen := map[string]int{}
	got := map[string]string{}
	line := func(t, key, run string) ledgerLine {
		return ledgerLine{T: t, Job: job.ID, Key: key, Attempt: job.Attempt, Lease: lease, Worker: d.id, Run: run, At: time.Now().UnixNano()}
	}
	parked := func(key string, err error) error {
		if errors.Is(err, worker.ErrParked) {
			if werr := d.led.write(line(ledgerPark, key, "")); werr != nil {
				return werr
			}
		}
		return err
	}
	first := job.Attempt == 1
	for i, call := range durableCalls {
		key := stepKey(seen, call.name)
		switch call.kind {
		case wire.StepSleep:
			ms, _ := strconv.Atoi(job.Metadata["sleep_ms"])
			if err := job.Sleep(ctx, call.name, time.Duration(ms)*time.Millisecond); err != nil {
				return parked(key, err)
			}
			if err := d.led.write(line(ledgerWoke, key, "")); err != nil {
				return err
			}
			continue
		case wire.StepWait:
			ms, _ := strconv.Atoi(job.Metadata["wait_ms"])
			if err := d.led.write(line(ledgerWait, key, "")); err != nil {
				return err
			}
			payload, ok, err := job.WaitForEvent(ctx, call.name, durableEvent, job.Metadata["event_key"], time.Duration(ms)*time.Millisecond)
			if err != nil {
				return parked(key, err)
			}
			var ev eventPayload
			if ok {
				_ = json.Unmarshal(payload, &ev)
			}
			l := line(ledgerHeard, key, "")
			l.Heard, l.EventKey, l.N = ok, ev.Key, ev.N
			if err := d.led.write(l); err != nil {
				return err
			}
			continue
		case wire.StepInvoke:
			raw, err := job.Invoke(ctx, call.name, childRequest(job.ID))
			if err != nil {
				return parked(key, err)
			}
			var res childResult
			_ = json.Unmarshal(raw, &res)
			l := line(ledgerSpawned, key, res.Run)
			l.Child = res.Child
			if err := d.led.write(l); err != nil {
				return err
			}
			continue
		}
		run := fmt.Sprintf("%s-%d-%d", d.id, os.Getpid(), d.runs.Add(1))
		step := job.Step
		if d.plantRerun && i == 0 && !first {
			step = withoutJournal
		}
		raw, err := step(ctx, call.name, func(ctx context.Context) (any, error) {
			if err := d.led.write(line(ledgerRun, key, run)); err != nil {
				return nil, err
			}
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(time.Duration(stepMS) * time.Millisecond):
			}
			if first && job.Metadata["fail_run"] == key {
				return nil, errors.New("planned failure in the step, before its record")
			}
			return stepResult{Run: run, Lease: lease, Attempt: job.Attempt}, nil
		})
		if err != nil {
			return err
		}
		var res stepResult
		if err := json.Unmarshal(raw, &res); err != nil || res.Run == "" {
			return worker.NoRetry(fmt.Errorf("step %s returned %s, not a durable step's result", key, raw))
		}
		if err := d.led.write(line(ledgerCommit, key, res.Run)); err != nil {
			return err
		}
		got[key] = res.Run
		if first && job.Metadata["fail_after"] == key {
			return errors.New("planned failure after the step's record")
		}
	}
	end := line(ledgerEnd, "", "")
	end.Steps = got
	return d.led.write(end)
}

// child is the handler of a durable job's child: it notes its run and
// returns it as its result.
func (d *durableWorker) child(ctx context.Context, job *worker.Job) error {
	run := fmt.Sprintf("%s-%d-%d", d.id, os.Getpid(), d.runs.Add(1))
	l := ledgerLine{T: ledgerChild, Job: job.ID, Attempt: job.Attempt, Lease: d.tap.lease(job.ID, job.Attempt), Worker: d.id,
		Run: run, Parent: job.Metadata["parent"], At: time.Now().UnixNano()}
	if err := d.led.write(l); err != nil {
		return err
	}
	return job.SetResult(childResult{Child: job.ID, Run: run})
}

// withoutJournal runs fn as a step whose record was lost: the planted
// fault of DurableWorkerConfig.PlantRerun.
func withoutJournal(ctx context.Context, _ string, fn worker.StepFunc) (json.RawMessage, error) {
	v, err := fn(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// DurableWorkerConfig configures RunDurableWorker.
type DurableWorkerConfig struct {
	Servers     []string
	ID          string
	Ledger      string // the ledger file, appended to
	Concurrency int
	Log         io.Writer // the worker's warnings; nil: none
	// PlantRerun plants the fault the durable checks look for: after its
	// first attempt the handler runs its first step without the journal,
	// again. A run with it must report that step as run again.
	PlantRerun bool
}

// RunDurableWorker serves the durable jobs of a chaos run until ctx ends:
// the chaosworker process (cmd/chaosworker).
func RunDurableWorker(ctx context.Context, cfg DurableWorkerConfig) error {
	led, err := openLedger(cfg.Ledger)
	if err != nil {
		return err
	}
	defer led.close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 16
	tap := &leaseTap{base: base, got: make(map[string]claimedAttempt)}
	ccfg := client.DefaultConfig()
	ccfg.Servers, ccfg.HTTPClient = cfg.Servers, &http.Client{Transport: tap, Timeout: requestTimeout}
	cl, err := client.New(ccfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	wcfg := worker.DefaultConfig()
	wcfg.Client, wcfg.ID, wcfg.Queues, wcfg.Shell = cl, cfg.ID, []string{durableQueue}, false
	wcfg.Concurrency = max(cfg.Concurrency, 1)
	wcfg.PollWait, wcfg.Grace = 2*time.Second, time.Second
	if cfg.Log != nil {
		wcfg.Logger = slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	w, err := worker.New(wcfg)
	if err != nil {
		return err
	}
	d := &durableWorker{id: cfg.ID, led: led, tap: tap, plantRerun: cfg.PlantRerun}
	w.Handle(durableType, d.handle)
	w.Handle(durableChildType, d.child)
	return w.Run(ctx)
}
