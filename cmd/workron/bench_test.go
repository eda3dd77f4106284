package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/syncbuf"
	"github.com/workron/workron/internal/tools/bench"
)

// TestBench runs every scenario of `workron bench --short` against its own
// in-process cluster, with small numbers, and asserts only that the
// correctness checks pass and every figure is reported; speed is never
// asserted.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster and loads it for several seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncbuf.Buffer // the in-process nodes' loggers write to it at once
	args := []string{"--short", "--jobs", "300", "--clients", "16", "--rate", "100", "--duration", "1s", "--resume-steps", "100", "-o", "json",
		"--scenarios", "submit_single,submit_batch,submit_batch_metadata,claim_done,claim_done_piggyback,claim_done_batched,claim_done_worker,claim_done_limits,latency," +
			"step_record,step_jobs,step_resume,event_wake"} // TestBenchProcesses runs the rest
	if err := runBench(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("runBench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var got []string
	for line := range strings.Lines(stdout.String()) {
		var fg bench.Figure
		if err := json.Unmarshal([]byte(line), &fg); err != nil {
			t.Fatalf("output line %q is not a figure: %v", line, err)
		}
		if !fg.Correct {
			t.Errorf("figure %s is not correct: %s", fg.Figure, fg.Problems)
		}
		got = append(got, fg.Figure)
	}
	want := []string{"submit_single", "submit_single_follower", "submit_batch", "submit_batch_metadata", "claim_done", "claim_done_piggyback", "claim_done_batched",
		"claim_done_worker", "claim_done_plain", "claim_done_keys", "claim_done_limits", "claim_done_limits_ratio", "claim_done_limits_cpu_ratio", "latency_p50", "latency_p99", "latency_max",
		"step_record_p50", "step_record_p99", "step_record_max", "step_jobs",
		"step_resume_median", "step_resume_max", "step_resume_results_median", "step_resume_results_max",
		"event_wake_p50", "event_wake_p99", "event_wake_max"}
	if !slices.Equal(got, want) {
		t.Errorf("figures = %v, want %v", got, want)
	}
}

// TestBenchProcesses runs the scenarios that start real workron processes
// (real_workers, failover, large_store, bulk_retry_kill) in --short mode, from a workron
// binary built for the test, and asserts only that the correctness checks
// pass and every figure is reported; speed is never asserted.
func TestBenchProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server and worker processes and kills a leader")
	}
	bin := workronBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncbuf.Buffer // the in-process nodes' loggers write to it at once
	args := []string{"--short", "--jobs", "300", "--clients", "16", "-o", "json", "--bin", bin,
		"--scenarios", "real_workers,failover,large_store,bulk_retry_kill"}
	if err := runBench(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("runBench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var got []string
	for line := range strings.Lines(stdout.String()) {
		var fg bench.Figure
		if err := json.Unmarshal([]byte(line), &fg); err != nil {
			t.Fatalf("output line %q is not a figure: %v", line, err)
		}
		if !fg.Correct {
			t.Errorf("figure %s is not correct: %s", fg.Figure, fg.Problems)
		}
		got = append(got, fg.Figure)
	}
	want := []string{"fork_exec_ceiling", "real_workers", "failover_median", "failover_max",
		"large_store_submit_empty", "large_store_submit", "large_store_submit_vs_empty",
		"large_store_claim_done_empty", "large_store_claim_done", "large_store_claim_done_vs_empty",
		"large_store_list_queue_empty", "large_store_list_queue", "large_store_list_metadata_empty", "large_store_list_metadata",
		"large_store_list_done_empty", "large_store_list_done", "large_store_list_filter_empty", "large_store_list_filter",
		"large_store_fill", "large_store_rss_n1", "large_store_rss_n2", "large_store_rss_n3", "large_store_anon_max",
		"large_store_snapshot_bytes_per_entry", "large_store_disk_per_job",
		"large_store_restart", "large_store_restart_clean", "large_store_snapshot", "large_store_join",
		"bulk_retry_kill", "bulk_retry_kill_resume", "bulk_retry_kill_submit_p50_before", "bulk_retry_kill_submit_p99_before",
		"bulk_retry_kill_submit_p50_during", "bulk_retry_kill_submit_p99_during", "bulk_retry_kill_submit_election_max"}
	if !slices.Equal(got, want) {
		t.Errorf("figures = %v, want %v", got, want)
	}
}

// TestBenchFlags checks that bad flags are refused before anything starts.
func TestBenchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--clients", "0"},
		{"--rate", "-1"},
		{"--scenarios", "submit_single,nope"},
		{"-o", "yaml"},
		{"--failover-rounds", "0"},
		{"--large-jobs", "-1"},
		{"--large-nodes", "0"},
		{"--large-min-free-gb", "-1"},
		{"--proc-raft-timeout", "1ms"},
		{"--resume-steps", "10000"},
		{"--latency-workers", "0"},
		{"--latency-workers", "1025"},
	} {
		var stdout, stderr bytes.Buffer
		err := runBench(context.Background(), args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("runBench(%q) = %v, want an error naming %s", args, err, args[0])
		}
	}
}
