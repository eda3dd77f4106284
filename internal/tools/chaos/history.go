package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"sync"
	"time"
)

// OpKind is what a client did.
type OpKind string

// The operations of a history. Final is added by the checker: the state read
// after quiescence, which every linearization must reach.
const (
	OpSubmit    OpKind = "submit"
	OpClaim     OpKind = "claim"
	OpHeartbeat OpKind = "heartbeat"
	OpDone      OpKind = "done"
	OpFail      OpKind = "fail"
	OpGet       OpKind = "get"
	OpFinal     OpKind = "final"
)

// Outcome is what the client learnt.
type Outcome string

// Outcomes, from the HTTP status (see classify).
const (
	// OutOK is a 2xx.
	OutOK Outcome = "ok"
	// OutRejected is a 409: a stale lease, or not running; nothing changed.
	OutRejected Outcome = "rejected"
	// OutNotFound is a 404.
	OutNotFound Outcome = "not_found"
	// OutNoEffect is a 503 or 429: the API promises nothing was done.
	OutNoEffect Outcome = "no_effect"
	// OutUnknown is a timeout, a lost connection, a 502, 504 or 500: the
	// operation may or may not have taken effect, at any time after its
	// call.
	OutUnknown Outcome = "unknown"
	// OutInvalid is any other 4xx: a bug of the harness or the API.
	OutInvalid Outcome = "invalid"
)

// Op is one recorded operation, with its call and return times in
// nanoseconds since the run started (Return is meaningless when Outcome is
// OutUnknown: the operation is open until the end).
type Op struct {
	Client  int     `json:"client"`
	Kind    OpKind  `json:"kind"`
	Key     string  `json:"key,omitempty"` // submit: the idempotency key
	Job     string  `json:"job,omitempty"`
	Worker  string  `json:"worker,omitempty"`
	Lease   uint64  `json:"lease,omitempty"` // sent (heartbeat, done, fail) or granted (claim)
	Call    int64   `json:"call"`
	Return  int64   `json:"return"`
	Outcome Outcome `json:"outcome"`
	Code    int     `json:"code,omitempty"`
	// Created is a submit's 201 (rather than 200 for an existing job).
	Created bool `json:"created,omitempty"`
	// Status, Attempts and JobLease are what the reply showed of the job.
	Status   string `json:"status,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	JobLease uint64 `json:"job_lease,omitempty"`
	Err      string `json:"err,omitempty"`
	// Synth marks a claim the checker derived from an unknown claim and the
	// attempt it must have produced.
	Synth bool `json:"synth,omitempty"`
}

// recorder collects operations from every client goroutine.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
	next  int
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

// client returns a new client id.
func (r *recorder) client() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	return r.next - 1
}

func (r *recorder) add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// history returns the operations sorted by call time.
func (r *recorder) history() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, k int) bool { return out[i].Call < out[k].Call })
	return out
}

// writeHistory writes ops as JSON lines.
func writeHistory(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readHistory reads what writeHistory wrote.
func readHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	dec := json.NewDecoder(bufio.NewReader(f))
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}
