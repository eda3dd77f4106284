//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
)

// heartbeatEvery is how often a virtual worker renews a lease.
const heartbeatEvery = leaseTTL / 3

// vworker is a virtual worker: it claims, heartbeats and reports over HTTP
// like `workron worker`, pretends to run each job as its metadata says, and
// records every request. Now and then it dies mid-job (abandons the job
// silently), and the harness can cut its network.
type vworker struct {
	id     string
	l      *load
	tr     *faultyTransport
	api    *nodeClients
	client int
	rng    *rand.Rand
	// abandoned counts jobs it walked away from (a simulated crash).
	abandoned atomic.Int64
}

func (w *vworker) run(ctx context.Context, seed uint64) {
	w.client = w.l.rec.client()
	w.rng = rand.New(rand.NewPCG(seed, 3))
	for ctx.Err() == nil {
		j, ok := w.claim(ctx)
		if !ok {
			continue
		}
		w.work(ctx, j)
	}
}

// claim asks for one job; false if none came (or the outcome is unknown).
func (w *vworker) claim(ctx context.Context) (*wire.Job, bool) {
	req := wire.ClaimRequest{WorkerID: w.id, Queues: []string{chaosQueue, limitedQueue}, Shell: true, Max: 1, Wait: "1s"}
	op := Op{Client: w.client, Kind: OpClaim, Worker: w.id, Call: w.l.rec.now()}
	r := w.l.do(ctx, w.api, w.rng, http.MethodPost, "/jobs/claim", req)
	op.Return, op.Code, op.Outcome, op.Err = w.l.rec.now(), r.code, r.outcome(), r.errText()
	w.l.stats.claims.Add(1)
	switch op.Outcome {
	case OutOK:
		var cr wire.ClaimResponse
		if err := json.Unmarshal(r.body, &cr); err != nil || len(cr.Jobs) > 1 {
			op.Outcome, op.Err = OutInvalid, "bad claim reply: "+string(r.body)
			w.l.noteInvalid(op)
			w.l.rec.add(op)
			return nil, false
		}
		if len(cr.Jobs) == 0 {
			return nil, false // nothing claimed: no job's history changes
		}
		j := cr.Jobs[0]
		op.Job, op.Lease, op.Status, op.Attempts, op.JobLease = j.ID, j.Lease, j.Status, j.Attempts, j.Lease
		w.l.rec.add(op)
		return &j, true
	case OutUnknown:
		// Kept: the checker matches it with an attempt of this worker that
		// no reply announced, if there is one.
		w.l.rec.add(op)
	case OutInvalid, OutRejected, OutNotFound:
		w.l.noteInvalid(op)
		w.l.rec.add(op)
	}
	w.pause(ctx, 50*time.Millisecond+time.Duration(w.rng.IntN(100))*time.Millisecond)
	return nil, false
}

func (w *vworker) pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// work pretends to run j: heartbeats until its run time is over, then
// reports. A rejected heartbeat means the lease is gone: stop, report nothing.
func (w *vworker) work(ctx context.Context, j *wire.Job) {
	outcome := j.Metadata["outcome"]
	runMS, _ := strconv.Atoi(j.Metadata["run_ms"])
	run := time.Duration(runMS) * time.Millisecond
	success := true
	exit, msg := 0, ""
	switch outcome {
	case outcomeFail:
		success, exit = false, 3
	case outcomeFlaky:
		if j.Attempts < 2 {
			success, exit = false, 4
		}
	case outcomeTimeout:
		run, success, exit, msg = 1300*time.Millisecond, false, -1, "timed out after 1s"
	}
	crashAt := time.Duration(-1)
	if w.rng.IntN(100) < 3 {
		crashAt = time.Duration(w.rng.Int64N(int64(run) + 1))
	}
	start := time.Now()
	for {
		left := run - time.Since(start)
		if crashAt >= 0 && time.Since(start) >= crashAt {
			w.abandoned.Add(1)
			w.l.stats.crashes.Add(1)
			return
		}
		if left <= 0 {
			break
		}
		w.pause(ctx, min(left, heartbeatEvery))
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= run {
			break
		}
		if !w.heartbeat(ctx, j) {
			return
		}
	}
	w.report(ctx, j, success, exit, msg)
}

func (w *vworker) heartbeat(ctx context.Context, j *wire.Job) bool {
	op := Op{Client: w.client, Kind: OpHeartbeat, Job: j.ID, Worker: w.id, Lease: j.Lease, Call: w.l.rec.now()}
	r := w.l.do(ctx, w.api, w.rng, http.MethodPost, "/jobs/"+j.ID+"/heartbeat", wire.HeartbeatRequest{Lease: j.Lease})
	w.l.stats.heartbeats.Add(1)
	op.Return, op.Code, op.Outcome, op.Err = w.l.rec.now(), r.code, r.outcome(), r.errText()
	switch op.Outcome {
	case OutOK, OutRejected, OutNotFound:
		w.l.rec.add(op) // unknown heartbeats change nothing the model sees
	case OutInvalid:
		w.l.noteInvalid(op)
	}
	return op.Outcome != OutRejected && op.Outcome != OutNotFound
}

// report sends done or fail, resending the same report while the outcome is
// unknown or nothing was done, a few times, as `workron worker` does.
func (w *vworker) report(ctx context.Context, j *wire.Job, success bool, exit int, msg string) {
	kind, path := OpDone, "/jobs/"+j.ID+"/done"
	body := wire.ReportRequest{Lease: j.Lease, ExitCode: &exit, Output: j.ID + " by " + w.id + "\n"}
	if !success {
		kind, path = OpFail, "/jobs/"+j.ID+"/fail"
		body.Error = msg
	}
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		if try > 0 {
			w.pause(ctx, time.Duration(100<<min(try, 4))*time.Millisecond)
		}
		op := Op{Client: w.client, Kind: kind, Job: j.ID, Worker: w.id, Lease: j.Lease, Call: w.l.rec.now()}
		r := w.l.do(ctx, w.api, w.rng, http.MethodPost, path, body)
		op.Return, op.Code, op.Outcome, op.Err = w.l.rec.now(), r.code, r.outcome(), r.errText()
		w.l.stats.reports.Add(1)
		if op.Outcome == OutOK {
			var got wire.Job
			if err := json.Unmarshal(r.body, &got); err == nil {
				op.Status, op.Attempts, op.JobLease = got.Status, got.Attempts, got.Lease
			}
		}
		if op.Outcome == OutInvalid {
			w.l.noteInvalid(op)
		}
		if op.Outcome != OutNoEffect {
			w.l.rec.add(op)
		}
		if op.Outcome != OutUnknown && op.Outcome != OutNoEffect {
			return
		}
	}
}
