//go:build unix && !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// TestEndToEndShellExampleParks runs examples/durable-shell/order.sh on
// the real `workron worker`, twice. Order a: the job parks on its wait
// (the worker ends the script, no report), `workron events send` plays
// the webhook, and the script runs again from the top: the charge
// replays, the wait prints the payload, the receipt runs; each step's
// command ran once and the job is done. Order b: no webhook, the wait
// times out (wait-event exits 3), the script refunds and fails.
func TestEndToEndShellExampleParks(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts a node and a worker process")
	}
	bin := workronBinary(t)
	srv, _ := inProcessNode(t, "--id", "park1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "park1"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms")
	startWorkerProc(t, bin, srv.advertise, "park-worker",
		[]string{"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")}, "--poll-wait", "1s")
	cs := clientSecurity{}
	cl, err := cs.newClient([]string{srv.advertise}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	script, err := filepath.Abs(filepath.Join(repoRoot, "examples", "durable-shell", "order.sh"))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(order, timeout, log string) string {
		one := 1
		j, err := cl.Submit(t.Context(), wire.SubmitRequest{Command: "sh " + script, MaxAttempts: &one,
			Env: map[string]string{"ORDER": order, "TIMEOUT": timeout, "LOG": log}})
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	dir := t.TempDir()

	logA := filepath.Join(dir, "a.log")
	a := submit("order-a", "1h", logA)
	pollUntil(t, 30*time.Second, func() error {
		j, err := cl.Get(t.Context(), a)
		if err != nil {
			return err
		}
		if j.Parked == nil || j.Parked.Kind != wire.StepWait || j.Parked.Event != "payment.settled" || j.Parked.EventKey != "order-a" {
			return fmt.Errorf("job %s, parked %+v", j.Status, j.Parked)
		}
		return nil
	})
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"events", "send", "--server", srv.advertise, "payment.settled", "order-a", `{"status":"settled"}`}, &stdout, &stderr); err != nil {
		t.Fatalf("events send: %v (%s)", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "woke 1 job(s)") {
		t.Fatalf("events send said %q", stdout.String())
	}
	end := waitEnded(t, cl, a)
	if end.Status != wire.StatusDone || end.Attempts != 1 {
		t.Fatalf("order a: job %s after %d attempts: %s\n%s", end.Status, end.Attempts, end.LastError, end.Output)
	}
	if b, err := os.ReadFile(logA); err != nil || string(b) != "charged order-a\nreceipt for ch_order-a: {\"status\":\"settled\"}\n" {
		t.Fatalf("order a's steps wrote %q (%v), want the charge and the receipt once each", b, err)
	}

	logB := filepath.Join(dir, "b.log")
	b := submit("order-b", "300ms", logB)
	end = waitEnded(t, cl, b)
	if end.Status != wire.StatusFailed || !strings.Contains(end.Output, "payment of order-b not settled within 300ms") {
		t.Fatalf("order b: job %s: %s\n%s", end.Status, end.LastError, end.Output)
	}
	if got, err := os.ReadFile(logB); err != nil || string(got) != "charged order-b\nrefunded ch_order-b\n" {
		t.Fatalf("order b's steps wrote %q (%v), want the charge and the refund once each", got, err)
	}
}

// waitEnded polls job id until it is done, failed or cancelled.
func waitEnded(t *testing.T, cl *client.Client, id string) *wire.Job {
	t.Helper()
	var end *wire.Job
	pollUntil(t, 30*time.Second, func() error {
		j, err := cl.Get(t.Context(), id)
		if err != nil {
			return err
		}
		if j.Status != wire.StatusDone && j.Status != wire.StatusFailed && j.Status != wire.StatusCancelled {
			return fmt.Errorf("job %s", j.Status)
		}
		end = j
		return nil
	})
	return end
}

// TestEndToEndShellSleepSignalInvoke runs a script of `workron sleep`,
// `workron wait-signal` and `workron invoke` on the real `workron
// worker`: it parks on the sleep and wakes by itself, parks on the
// signal until `workron jobs signal` sends it, then invokes a shell
// child and prints its result. The script's log shows it ran again from
// the top after each of the three wake-ups (its lines after a wait
// repeat) and went no further while parked; it all took one attempt.
func TestEndToEndShellSleepSignalInvoke(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts a node and a worker process")
	}
	bin := workronBinary(t)
	srv, _ := inProcessNode(t, "--id", "park2", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "park2"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms")
	startWorkerProc(t, bin, srv.advertise, "park-worker2",
		[]string{"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")}, "--poll-wait", "1s")
	cs := clientSecurity{}
	cl, err := cs.newClient([]string{srv.advertise}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	log := filepath.Join(t.TempDir(), "log")
	script := `workron sleep nap 1s
echo slept >> "$LOG"
sig=$(workron wait-signal approve approve)
echo "signal $sig" >> "$LOG"
res=$(workron invoke child '{"command":"echo \"\\\"child-out\\\"\" > \"$WORKRON_RESULT_FILE\""}')
echo "child $res" >> "$LOG"`
	one := 1
	j, err := cl.Submit(t.Context(), wire.SubmitRequest{Command: script, MaxAttempts: &one, Env: map[string]string{"LOG": log}})
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 30*time.Second, func() error {
		got, err := cl.Get(t.Context(), j.ID)
		if err != nil {
			return err
		}
		if got.Parked == nil || got.Parked.Kind != wire.StepWait || got.Parked.Signal != "approve" {
			return fmt.Errorf("job %s, parked %+v", got.Status, got.Parked)
		}
		return nil
	})
	if b, _ := os.ReadFile(log); string(b) != "slept\n" {
		t.Fatalf("log while parked on the signal: %q, want only the sleep's line", b)
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"jobs", "get", "--server", srv.advertise, j.ID}, &stdout, &stderr); err != nil ||
		!strings.Contains(stdout.String(), "parked:") || !strings.Contains(stdout.String(), "wait for signal approve (step approve)") {
		t.Fatalf("jobs get of a parked job: %v\n%s", err, stdout.String())
	}
	if !regexp.MustCompile(`(?m)^  1\s+\S+\s+.*parked, not counted\s+-\s+parked on sleep step `).MatchString(stdout.String()) {
		t.Fatalf("jobs get of a parked job: no attempt marked parked, not counted\n%s", stdout.String())
	}
	stdout.Reset()
	if err := run(t.Context(), []string{"jobs", "signal", "--server", srv.advertise, j.ID, "approve", `"yes"`}, &stdout, &stderr); err != nil {
		t.Fatalf("jobs signal: %v (%s)", err, stderr.String())
	}
	end := waitEnded(t, cl, j.ID)
	if end.Status != wire.StatusDone || end.Attempts != 1 {
		t.Fatalf("job %s after %d attempts: %s\n%s", end.Status, end.Attempts, end.LastError, end.Output)
	}
	want := "slept\nslept\nsignal \"yes\"\nslept\nsignal \"yes\"\nchild \"child-out\"\n"
	if b, err := os.ReadFile(log); err != nil || string(b) != want {
		t.Fatalf("log %q (%v), want %q", b, err, want)
	}
}
