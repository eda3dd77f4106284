package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

func TestQueueLimitCLI(t *testing.T) {
	c := clustertest.New(t, 1)
	t.Setenv("WORKRON_SERVER", c.URL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, args, &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}

	t.Run("SetsShowsAndClears", func(t *testing.T) {
		out, err := cmd("queues", "limit", "emails", "--concurrency", "10", "--key-concurrency", "2", "--rate", "100/s", "--burst", "20", "--key-rate", "600/m")
		if err != nil || !strings.Contains(out, "emails") || !strings.Contains(out, "100/s burst 20") || !strings.Contains(out, "600/m") {
			t.Fatalf("set: %v\n%s", err, out)
		}
		out, err = cmd("queues", "limit", "emails", "-o", "json")
		if err != nil || !strings.Contains(out, `"concurrency": 10`) || !strings.Contains(out, `"key_concurrency": 2`) {
			t.Fatalf("show: %v\n%s", err, out)
		}
		for range 3 {
			if out, err = cmd("submit", "--queue", "emails", "--concurrency-key", "acme", "-o", "json", "--", "true"); err != nil {
				t.Fatalf("submit with a key: %v\n%s", err, out)
			}
		}
		hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		t.Cleanup(hc.CloseIdleConnections)
		post(t, hc, c.URL(0)+"/workers/register", wire.Worker{ID: "w1", Queues: []string{"emails"}, Resources: wire.Resources{Slots: 4}})
		var res wire.ClaimResponse
		decodeInto(t, post(t, hc, c.URL(0)+"/jobs/claim", wire.ClaimRequest{WorkerID: "w1", Queues: []string{"emails"}, Shell: true, Max: 4}), &res)
		if len(res.Jobs) != 2 {
			t.Fatalf("claimed %d jobs, want acme's 2", len(res.Jobs))
		}
		out, err = cmd("jobs", "get", "job-3")
		if err != nil || !strings.Contains(out, "waiting:          key acme at its limit 2/2") || !strings.Contains(out, "concurrency_key:  acme") {
			t.Fatalf("jobs get of the held job: %v\n%s", err, out)
		}
		out, err = cmd("queues", "limit", "emails")
		if err != nil || !strings.Contains(out, "1 on key_concurrency") {
			t.Fatalf("show with a held job: %v\n%s", err, out)
		}
		out, err = cmd("queues", "limit", "emails", "--clear")
		if err != nil || !strings.Contains(out, "no limits") {
			t.Fatalf("clear: %v\n%s", err, out)
		}
	})

	t.Run("KeyWeightsPausedKeysAndUncountedAttemptsShow", func(t *testing.T) {
		out, err := cmd("queues", "limit", "api", "--key-weight", "acme=3", "--key-weight", "beta=2")
		if err != nil || !strings.Contains(out, "key weights: acme=3 beta=2") {
			t.Fatalf("set weights: %v\n%s", err, out)
		}
		out, err = cmd("submit", "--queue", "api", "--concurrency-key", "beta", "-o", "json", "--", "true")
		if err != nil {
			t.Fatalf("submit: %v\n%s", err, out)
		}
		var j wire.Job
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		t.Cleanup(hc.CloseIdleConnections)
		var res wire.ClaimResponse
		decodeInto(t, post(t, hc, c.URL(0)+"/jobs/claim", wire.ClaimRequest{WorkerID: "w2", Queues: []string{"api"}, Shell: true}), &res)
		if len(res.Jobs) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(res.Jobs))
		}
		post(t, hc, c.URL(0)+"/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: res.Jobs[0].Lease, Error: "429 from api", RateLimitedFor: "1h"})
		out, err = cmd("queues")
		if err != nil || !strings.Contains(out, "queue api key beta rate-limited until ") || !strings.Contains(out, "(429 from api)") {
			t.Fatalf("queues: %v\n%s", err, out)
		}
		out, err = cmd("jobs", "get", j.ID)
		if err != nil || !regexp.MustCompile(`(?m)^  1\s+w2\s+.*rate_limited, not counted\s+-\s+429 from api$`).MatchString(out) || !strings.Contains(out, "waiting:          key beta rate-limited until") {
			t.Fatalf("jobs get: %v\n%s", err, out)
		}
		if _, err := cmd("queues", "limit", "api", "--key-weight", "acme"); err == nil {
			t.Error("--key-weight without =N was accepted")
		}
	})

	t.Run("PausesAreListedAndLifted", func(t *testing.T) {
		out, err := cmd("queues", "limit", "sms", "--rate-limit-pauses-queue", "--max-pause", "10m")
		if err != nil || !strings.Contains(out, "pauses the queue: true; max pause: 10m0s") {
			t.Fatalf("set the pause settings: %v\n%s", err, out)
		}
		for range 2 {
			if out, err = cmd("submit", "--queue", "sms", "--", "true"); err != nil {
				t.Fatalf("submit: %v\n%s", err, out)
			}
		}
		hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		t.Cleanup(hc.CloseIdleConnections)
		var res wire.ClaimResponse
		decodeInto(t, post(t, hc, c.URL(0)+"/jobs/claim", wire.ClaimRequest{WorkerID: "w3", Queues: []string{"sms"}, Shell: true}), &res)
		if len(res.Jobs) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(res.Jobs))
		}
		post(t, hc, c.URL(0)+"/jobs/"+res.Jobs[0].ID+"/fail", wire.ReportRequest{Lease: res.Jobs[0].Lease, Error: "429 from sms", RateLimitedFor: "1h"})
		out, err = cmd("queues", "pauses")
		if err != nil || !strings.Contains(out, "sms    (the queue)") || !strings.Contains(out, "429 from sms") {
			t.Fatalf("queues pauses: %v\n%s", err, out)
		}
		out, err = cmd("queues", "lift", "sms")
		if err != nil || !strings.Contains(out, "lifted 1 pause(s) of queue sms") {
			t.Fatalf("queues lift: %v\n%s", err, out)
		}
		out, err = cmd("queues", "pauses", "-o", "json")
		if err != nil || strings.Contains(out, `"queue": "sms"`) {
			t.Fatalf("queues pauses after the lift: %v\n%s", err, out)
		}
		decodeInto(t, post(t, hc, c.URL(0)+"/jobs/claim", wire.ClaimRequest{WorkerID: "w3", Queues: []string{"sms"}, Shell: true, Max: 5}), &res)
		if len(res.Jobs) != 2 {
			t.Fatalf("claimed %d jobs after the lift, want 2", len(res.Jobs))
		}
		if out, err := cmd("queues", "lift"); err == nil {
			t.Errorf("queues lift without a name: %s", out)
		}
	})

	t.Run("BadLimitsNameTheField", func(t *testing.T) {
		for _, c := range []struct{ flag, value, field string }{
			{"--concurrency", "0", "concurrency"},
			{"--rate", "fast", "rate"},
			{"--key-concurrency", "-1", "key_concurrency"},
		} {
			out, err := cmd("queues", "limit", "q", c.flag, c.value)
			if err == nil || !strings.Contains(out+err.Error(), c.field) {
				t.Errorf("%s %s: %v\n%s", c.flag, c.value, err, out)
			}
		}
		if _, err := cmd("queues", "limit", "q", "--clear", "--rate", "1/s"); err == nil {
			t.Error("--clear with a limit was accepted")
		}
	})
}
