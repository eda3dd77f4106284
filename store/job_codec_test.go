package store

import (
	"fmt"
	"testing"
)

// typicalJob is a shell job as the FSM stores it after two failed attempts
// and a third that succeeded.
func typicalJob() *Job {
	exit1, exit0 := 1, 0
	return &Job{
		ID:          "job-1048576",
		Seq:         1048576,
		Command:     "python3 /opt/etl/nightly.py --date 2026-11-21 --shard 7",
		Env:         map[string]string{"ETL_ENV": "prod", "SHARD": "7"},
		Metadata:    map[string]string{"team": "data"},
		Queue:       "etl",
		Priority:    5,
		Status:      StatusDone,
		MaxAttempts: 3,
		Attempts:    3,
		Timeout:     600e9,
		Backoff:     Backoff{Base: 1e9, Max: 3600e9, Jitter: 0.3},
		CreatedAt:   1763700000000000000,
		RunAt:       1763700004000000000,
		StartedAt:   1763700004100000000,
		DoneAt:      1763700034100000000,
		WorkerID:    "worker-03",
		Lease:       2097160,
		ExitCode:    &exit0,
		Output:      "rows read: 120394\nrows written: 120394\nelapsed: 29.8s\n",
		History: []Attempt{
			{Attempt: 1, WorkerID: "worker-01", Lease: 2097152, Status: StatusFailed, ExitCode: &exit1, Error: "exit status 1: connection refused", Started: 1763700000100000000, Ended: 1763700001100000000},
			{Attempt: 2, WorkerID: "worker-02", Lease: 2097156, Status: StatusFailed, Error: "lease expired", Started: 1763700001500000000, Ended: 1763700003500000000, Expired: true},
			{Attempt: 3, WorkerID: "worker-03", Lease: 2097160, Status: StatusDone, ExitCode: &exit0, Started: 1763700004100000000, Ended: 1763700034100000000},
		},
		Retention:   7 * 24 * 3600e9,
		ExpireAt:    1764304834100000000,
		ModifyIndex: 2097161,
	}
}

func BenchmarkJobEncode(b *testing.B) {
	j := typicalJob()
	b.Run("JSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encode(j); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkJobDecode(b *testing.B) {
	v, err := encode(typicalJob())
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("JSON/%dB", len(v)), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := decode(v, new(Job)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
