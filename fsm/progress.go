package fsm

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/workron/workron/store"
)

// Progress and results (issue #19).
//
// A running attempt's progress rides on its worker's heartbeats
// (LeaseRef.Progress), or on the job's own (Heartbeat.Progress, the seed
// API's): the heartbeat already rewrites the record of each job whose
// lease it renews, so keeping the latest progress there costs no log
// entry of its own, and the worker sends only the latest of the updates
// made since its last heartbeat. A claim clears it (a new attempt
// starts with none); the finished job keeps the last one reported.
//
// A job's result rides on the report that ends an attempt (Report.Result)
// and replaces the one stored; a report without one keeps it. The report
// also carries the attempt's last progress when no heartbeat did
// (Report.Progress), so a job that ends soon after an update keeps it.

// ProtocolProgress is the protocol of progress and results: op codes
// opWorkerHeartbeatProgress, opHeartbeatProgress and opReport3.
const ProtocolProgress = 3

// Limits of progress and results. The API refuses more (400 and 413); the
// FSM cuts a longer message and refuses a larger result, so a hand-made
// command cannot store more either.
const (
	// MaxProgressMessage is the longest progress message, in bytes.
	MaxProgressMessage = 200
	// MaxResultBytes is the largest result, in bytes of JSON.
	MaxResultBytes = 64 << 10
)

// LeaseProgress is how far a running attempt says it is: Percent from 0 to
// 100 and a short Message.
type LeaseProgress struct {
	Percent int    `json:"pct"`
	Message string `json:"msg,omitempty"`
}

// progressed reports whether c sets a field of ProtocolProgress, which
// Encode then writes with the newer op code.
func (c *Cmd) progressed() bool {
	switch {
	case c.Op == OpHeartbeat && c.Heartbeat != nil:
		return c.Heartbeat.Progress != nil
	case c.Op == OpWorkerHeartbeat && c.WorkerHeartbeat != nil:
		return c.WorkerHeartbeat.progressed()
	case c.Op == OpReport && c.Report != nil:
		return c.Report.progressed()
	}
	return false
}

// progressed reports whether one of h's leases carries progress.
func (h *WorkerHeartbeat) progressed() bool {
	for i := range h.Leases {
		if h.Leases[i].Progress != nil {
			return true
		}
	}
	return false
}

// progressed reports whether r carries a result or progress, which Encode
// then writes with op code opReport3.
func (r *Report) progressed() bool { return len(r.Result) > 0 || r.Progress != nil }

// stored is p as a job keeps it, recorded at now: Percent held to 0..100,
// Message cut to MaxProgressMessage bytes on a UTF-8 boundary.
func (p *LeaseProgress) stored(now int64) *store.Progress {
	msg := p.Message
	if len(msg) > MaxProgressMessage {
		msg = msg[:MaxProgressMessage]
		for len(msg) > 0 && !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	return &store.Progress{Percent: min(max(p.Percent, 0), 100), Message: msg, At: now}
}

// leaseProgress maps each listed lease of h that carries progress to it.
func (h *WorkerHeartbeat) leaseProgress() map[string]*LeaseProgress {
	var out map[string]*LeaseProgress
	for _, l := range h.Leases {
		if l.Progress == nil {
			continue
		}
		if out == nil {
			out = make(map[string]*LeaseProgress)
		}
		out[l.JobID] = l.Progress
	}
	return out
}

// checkResult refuses a result the store should not keep: larger than
// MaxResultBytes, or not JSON.
func checkResult(r json.RawMessage) error {
	switch {
	case r == nil:
		return nil
	case len(r) > MaxResultBytes:
		return &ValidationError{Field: "result", Reason: fmt.Sprintf("is %d bytes, more than the limit of %d", len(r), MaxResultBytes)}
	case !json.Valid(r):
		return &ValidationError{Field: "result", Reason: "is not JSON"}
	}
	return nil
}
