package chaos

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/workron/workron/api/wire"
)

// The linearizability model is one job's state machine, checked per job
// (porcupine's per-partition check, one partition per idempotency key).
//
// What the system does on its own, without a client operation, is known
// only afterwards: the leader's reaper expires leases, real `workron worker`
// processes (whose requests are not recorded) claim and report. So the
// model takes the job's final record (its attempts in order, each with its
// lease, worker and how it ended, and the final status) as an oracle, and
// allows those internal steps only in that order and only where the record
// shows them: attempt k can start without a recorded claim only if a real
// worker holds it; it can end without a recorded report only if it
// expired, or a real worker ran it. Everything else must be explained by
// the recorded operations of the virtual workers, submitters and readers:
//
//   - submit: 201 only if the job did not exist yet, 200 only if it did.
//   - claim: returns attempt k+1's lease only when no attempt runs, to the
//     worker the record names, with the attempt count k+1.
//   - heartbeat(lease): 2xx only while that lease's attempt runs; 409 only
//     when it does not.
//   - done/fail(lease): 2xx only while that lease's attempt runs and the
//     record says it ended that way (done, or failed by its worker), or
//     afterwards as the idempotent answer to a resent report; 409
//     otherwise. The reply's status must be the job's status after it.
//   - get: the status, attempt count and current lease of the job at some
//     point between call and return (these reads go to the leader).
//   - unknown outcomes (timeouts, lost connections, 502, 504) may have taken
//     effect or not, at any time after their call.
//   - final: the record itself, read after quiescence, must be reached.
//
// Because the record is used as the oracle, a result that the record
// contradicts (a done accepted for an attempt that expired, a lease handed
// to two workers, a job that went back to pending after done) has no
// linearization, and so does a record that the clients' observations
// contradict (an attempt that no claim could have produced).

// attemptInfo is one attempt of a job's final record.
type attemptInfo struct {
	Lease   uint64
	Worker  string
	End     string // "done", "failed", "expired", "cancelled", "returned"; "" while running
	Virtual bool   // by a virtual worker, whose requests are recorded
}

// jobRecord is a job's final state: the oracle of its partition.
type jobRecord struct {
	ID       string
	Key      string
	Attempts []attemptInfo
	Final    string // the job's status after quiescence
}

// recordOf builds a job's record from its final reading.
func recordOf(j wire.Job, virtual func(string) bool) jobRecord {
	r := jobRecord{ID: j.ID, Key: j.IdempotencyKey, Final: j.Status}
	for _, a := range j.AttemptHistory {
		end := a.Status
		if a.Expired && end != returned {
			end = "expired"
		}
		// A "returned" attempt ended internally and, once ended, does
		// not count: its claim reply was lost (the worker's next
		// heartbeat gave it back), or its lease ran out before the
		// worker acknowledged it (fsm/ack.go: expired too, not counted).
		r.Attempts = append(r.Attempts, attemptInfo{Lease: a.Lease, Worker: a.WorkerID, End: end, Virtual: virtual(a.WorkerID)})
	}
	if j.Status == wire.StatusRunning || j.Status == wire.StatusCancelling {
		r.Attempts = append(r.Attempts, attemptInfo{Lease: j.Lease, Worker: j.WorkerID, Virtual: virtual(j.WorkerID)})
	}
	return r
}

// mstate is the model's state of one job.
type mstate struct {
	Created bool
	K       int  // attempts of the record started
	Running bool // attempt K-1 runs
}

// returned is the end of an attempt whose claim reply never reached its
// worker: it ends without a report and stops counting as an attempt.
const returned = "returned"

// count is the attempt count a read shows in state s: the attempts
// started, but those returned only while they run.
func (m jobModel) count(s mstate) int {
	n := 0
	for i, a := range m.rec.Attempts[:s.K] {
		if a.End != returned || (s.Running && i == s.K-1) {
			n++
		}
	}
	return n
}

func terminal(status string) bool {
	return status == wire.StatusDone || status == wire.StatusFailed || status == wire.StatusCancelled
}

// jobModel is the model of one job, with its record.
type jobModel struct{ rec jobRecord }

// internalEnd reports whether attempt a may end with no recorded report.
func internalEnd(a attemptInfo) bool {
	switch a.End {
	case "expired", "cancelled", returned:
		return true
	case wire.StatusDone, wire.StatusFailed:
		return !a.Virtual
	}
	return false
}

// closure is s followed by every internal step the record allows, in order:
// a chain, since the record fixes the order.
func (m jobModel) closure(s mstate) []mstate {
	out := []mstate{s}
	for {
		switch {
		case s.Created && !s.Running && s.K < len(m.rec.Attempts) && !m.rec.Attempts[s.K].Virtual:
			s = mstate{Created: true, K: s.K + 1, Running: true}
		case s.Running && internalEnd(m.rec.Attempts[s.K-1]):
			s.Running = false
		default:
			return out
		}
		out = append(out, s)
	}
}

// status is what a read of the job shows in state s: "" if it does not exist.
func (m jobModel) status(s mstate) string {
	switch {
	case !s.Created:
		return ""
	case s.Running:
		return wire.StatusRunning
	case s.K == len(m.rec.Attempts) && terminal(m.rec.Final):
		return m.rec.Final
	}
	return wire.StatusPending
}

// sameStatus compares a read status with the model's ("scheduled" is a
// pending job waiting for its run time).
func sameStatus(read, model string) bool {
	if read == wire.StatusScheduled {
		read = wire.StatusPending
	}
	return read == model
}

// ended reports whether an attempt before the running one has lease and
// ended as end.
func (m jobModel) ended(s mstate, lease uint64, end string) bool {
	n := s.K
	if s.Running {
		n--
	}
	for _, a := range m.rec.Attempts[:n] {
		if a.Lease == lease {
			return a.End == end
		}
	}
	return false
}

func (m jobModel) current(s mstate) (attemptInfo, bool) {
	if !s.Running {
		return attemptInfo{}, false
	}
	return m.rec.Attempts[s.K-1], true
}

// step applies one operation to one state (after internal steps); nil if
// it cannot produce the recorded output.
func (m jobModel) step(s mstate, op Op) []mstate {
	unknown := op.Outcome == OutUnknown
	keep := []mstate{s}
	switch op.Kind {
	case OpSubmit:
		switch {
		case unknown && !s.Created:
			return []mstate{s, {Created: true}}
		case unknown:
			return keep
		case op.Outcome == OutOK && op.Job == m.rec.ID && op.Created == !s.Created:
			return []mstate{{Created: true, K: s.K, Running: s.Running}}
		}
		return nil
	case OpClaim:
		valid := s.Created && !s.Running && s.K < len(m.rec.Attempts)
		if valid {
			a := m.rec.Attempts[s.K]
			valid = a.Virtual && a.Lease == op.Lease && a.Worker == op.Worker
		}
		next := mstate{Created: true, K: s.K + 1, Running: true}
		switch {
		case unknown && valid:
			return []mstate{s, next}
		case unknown:
			return keep
		case op.Outcome == OutOK && valid && op.Attempts == m.count(next) && op.Status == wire.StatusRunning:
			return []mstate{next}
		}
		return nil
	case OpHeartbeat:
		cur, ok := m.current(s)
		holds := ok && cur.Lease == op.Lease
		switch {
		case unknown, op.Outcome == OutOK && holds, op.Outcome == OutRejected && !holds:
			return keep
		}
		return nil
	case OpDone, OpFail:
		end := wire.StatusDone
		if op.Kind == OpFail {
			end = wire.StatusFailed
		}
		cur, ok := m.current(s)
		holds := ok && cur.Lease == op.Lease
		again := m.ended(s, op.Lease, end) // a resent report, answered as the first
		after := mstate{Created: true, K: s.K}
		switch {
		case unknown && holds && cur.End == end:
			return []mstate{s, after}
		case unknown:
			return keep
		case op.Outcome == OutOK && holds && cur.End == end && sameStatus(op.Status, m.status(after)):
			return []mstate{after}
		case op.Outcome == OutOK && again && sameStatus(op.Status, m.status(s)):
			return keep
		case op.Outcome == OutRejected && !holds && !again:
			return keep
		}
		return nil
	case OpGet:
		want := m.status(s)
		switch op.Outcome {
		case OutNotFound:
			if want == "" {
				return keep
			}
		case OutOK:
			cur, _ := m.current(s)
			if want != "" && sameStatus(op.Status, want) && op.Attempts == m.count(s) && (!s.Running || op.JobLease == cur.Lease) {
				return keep
			}
		}
		return nil
	case OpFinal:
		if s.K == len(m.rec.Attempts) && sameStatus(op.Status, m.status(s)) {
			return keep
		}
		return nil
	}
	return nil
}

func (m jobModel) nondeterministic() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []any { return []any{mstate{}} },
		Step: func(state, input, _ any) []any {
			op := input.(Op)
			var out []any
			for _, s := range m.closure(state.(mstate)) {
				for _, n := range m.step(s, op) {
					out = append(out, n)
				}
			}
			return out
		},
		Hash: func(state any) uint64 {
			s := state.(mstate)
			h := fnv.New64a()
			fmt.Fprintf(h, "%t/%d/%t", s.Created, s.K, s.Running)
			return h.Sum64()
		},
		DescribeOperation: func(input, _ any) string { return describeOp(input.(Op)) },
		DescribeState: func(state any) string {
			s := state.(mstate)
			if !s.Created {
				return "absent"
			}
			st := m.status(s)
			if s.Running {
				a := m.rec.Attempts[s.K-1]
				st += fmt.Sprintf(" lease %d on %s", a.Lease, a.Worker)
			}
			return fmt.Sprintf("%s, %d attempts", st, m.count(s))
		},
	}
}

func describeOp(op Op) string {
	var b strings.Builder
	b.WriteString(string(op.Kind))
	if op.Worker != "" {
		b.WriteString(" by " + op.Worker)
	}
	if op.Lease != 0 {
		fmt.Fprintf(&b, " lease %d", op.Lease)
	}
	b.WriteString(" -> " + string(op.Outcome))
	if op.Status != "" {
		fmt.Fprintf(&b, " %s", op.Status)
	}
	if op.Kind == OpGet && op.Outcome == OutOK {
		fmt.Fprintf(&b, " attempts %d lease %d", op.Attempts, op.JobLease)
	}
	if op.Synth {
		b.WriteString(" (matched to an unknown claim)")
	}
	return b.String()
}

// describeRecord is a one-line account of a job's record.
func describeRecord(r jobRecord) string {
	var parts []string
	for i, a := range r.Attempts {
		end := a.End
		if end == "" {
			end = "running"
		}
		parts = append(parts, fmt.Sprintf("#%d lease %d %s %s", i+1, a.Lease, a.Worker, end))
	}
	return fmt.Sprintf("%s (%s) final %s: %s", r.ID, r.Key, r.Final, strings.Join(parts, "; "))
}
