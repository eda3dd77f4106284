package fsm_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
)

// BenchmarkApplyHeartbeat times lease renewals on the hot path, against
// 10,240 running jobs held 16 a worker by 640 workers: Job16 is one log
// entry of 16 job heartbeats (jobs spread over the store), Worker16 one
// worker heartbeat renewing its 16 leases. Each renewal writes the job's
// record, and its head (store's heads bucket). The entries are encoded
// before the timer starts.
func BenchmarkApplyHeartbeat(b *testing.B) {
	const running, per = 10240, 16
	for _, name := range []string{"Job16", "Worker16"} {
		b.Run(name, func(b *testing.B) {
			f := newBenchFSM(b)
			index := uint64(0)
			log := func(now int64, cmds ...fsm.Cmd) *raft.Log {
				index++
				data, err := fsm.Encode(&fsm.Entry{Now: now, Cmds: cmds})
				if err != nil {
					b.Fatal(err)
				}
				return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
			}
			now := t0.UnixNano()
			for w := range running / per {
				jobs := make([]fsm.NewJob, per)
				for i := range jobs {
					jobs[i] = fsm.NewJob{Command: "/usr/local/bin/train --epochs 10", Queue: "default", MaxAttempts: 3}
				}
				f.ApplyBatch([]*raft.Log{log(now, submit(jobs...))})
				claim := claimCmd(fsm.Claim{WorkerID: fmt.Sprintf("worker-%d", w), Max: per, LeaseTTL: int64(ttl)})
				res := f.ApplyBatch([]*raft.Log{log(now, claim)})[0].([]fsm.Result)
				if n := len(res[0].Jobs); n != per {
					b.Fatalf("worker %d claimed %d jobs, want %d", w, n, per)
				}
			}
			logs := make([]*raft.Log, b.N)
			for i := range logs {
				at := now + int64(i+1)*1e6
				if name == "Worker16" {
					logs[i] = log(at, workerHeartbeat(fmt.Sprintf("worker-%d", i%(running/per)), ttl))
					continue
				}
				cmds := make([]fsm.Cmd, per)
				for k := range cmds {
					seq := (i*per*37+k*641)%running + 1 // 16 jobs far apart
					cmds[k] = heartbeat(fmt.Sprintf("%s%d", fsm.JobIDPrefix, seq), 0, ttl)
				}
				logs[i] = log(at, cmds...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range logs {
				res := f.ApplyBatch(logs[i : i+1])[0].([]fsm.Result)
				if res[0].Err != nil {
					b.Fatalf("heartbeat: %v", res[0].Err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/per, "ns/lease")
		})
	}
}
