package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/workron/workron/internal/binenc"
)

// Decode parses log bytes of either version. It returns *VersionError for
// an entry of a newer version, and a plain error for bytes that are not an
// entry, including one with an op code or command this version does not
// know. It allocates no more than a small multiple of len(data).
func Decode(data []byte) (*Entry, error) {
	var (
		e   *Entry
		err error
	)
	switch {
	case len(data) == 0:
		return nil, fmt.Errorf("decode entry: empty")
	case data[0] == EncodingVersion:
		e, err = decodeBinary(data)
	case data[0] == encodingJSON:
		e = new(Entry)
		err = json.Unmarshal(data[1:], e)
	case data[0] > EncodingVersion:
		return nil, &VersionError{Got: data[0]}
	default:
		err = fmt.Errorf("unknown encoding version %d", data[0])
	}
	if err != nil {
		return nil, fmt.Errorf("decode entry: %w", err)
	}
	for i, c := range e.Cmds {
		if !c.valid() {
			return nil, fmt.Errorf("decode entry: command %d (%q) lacks its arguments or is unknown", i, c.Op)
		}
	}
	return e, nil
}

// entryReader reads a version 2 entry.
type entryReader struct {
	binenc.Reader
	// names interns the strings a batch's jobs tend to share (queues,
	// types, the keys and values of env and metadata), so each is
	// allocated once an entry; made by the first job read.
	names binenc.Interner
}

func decodeBinary(data []byte) (*Entry, error) {
	r := entryReader{Reader: binenc.NewUTF8Reader(data)}
	r.Byte() // the version
	e := &Entry{Now: r.Varint()}
	n := r.Count(minCmdLen)
	if n > 0 {
		// A Cmd takes some 90 times the bytes of the shortest command:
		// room for more than 64 is made only as they are read.
		e.Cmds = make([]Cmd, 0, min(n, 64))
	}
	for range n {
		e.Cmds = append(e.Cmds, Cmd{})
		if r.cmd(&e.Cmds[len(e.Cmds)-1]); r.Err() != nil {
			break
		}
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	return e, nil
}

func (r *entryReader) cmd(c *Cmd) { r.cmdOf(c, r.Byte()) }

// cmdOf reads the argument of a command of op code code.
func (r *entryReader) cmdOf(c *Cmd, code byte) {
	switch code {
	case opJSON:
		r.jsonCmd(c)
	case opSubmit:
		c.Op, c.Submit = OpSubmit, r.submit(false, false)
	case opSubmitKeyed:
		if ProtocolVersion < ProtocolFlow { // as a binary before the code
			r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", code))
			return
		}
		c.Op, c.Submit = OpSubmit, r.submit(true, false)
	case opSubmitTraced:
		if ProtocolVersion < ProtocolTrace { // as a binary before the code
			r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", code))
			return
		}
		c.Op, c.Submit = OpSubmit, r.submit(true, true)
	case opClaim:
		c.Op, c.Claim = OpClaim, r.claim()
	case opHeartbeat:
		c.Op, c.Heartbeat = OpHeartbeat, r.heartbeat()
	case opWorkerHeartbeat:
		c.Op, c.WorkerHeartbeat = OpWorkerHeartbeat, r.workerHeartbeat()
	case opReport:
		c.Op, c.Report = OpReport, r.report()
	case opExpire:
		c.Op, c.Expire = OpExpire, r.expire()
	case opClaimFence:
		c.Op, c.Claim = OpClaim, r.claim()
		c.Claim.Token, c.Claim.Fenced, c.Claim.Seq = r.Str(), r.Bool(), r.Uvarint()
	case opHeartbeatFence:
		c.Op, c.Heartbeat = OpHeartbeat, r.heartbeat()
		c.Heartbeat.Token = r.Str()
	case opWorkerHeartbeatFence:
		c.Op, c.WorkerHeartbeat = OpWorkerHeartbeat, r.workerHeartbeat()
		h := c.WorkerHeartbeat
		h.Token, h.ClaimsFrom, h.ClaimsTo = r.Str(), r.Uvarint(), r.Uvarint()
	case opReportFence:
		c.Op, c.Report = OpReport, r.report()
		c.Report.Token = r.Str()
	case opReportCapped, opReportCappedChunked:
		if ProtocolVersion < ProtocolPauses || code == opReportCappedChunked && ProtocolVersion < ProtocolCascade {
			r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", code)) // as a binary before the code
			return
		}
		c.Op, c.Report = OpReport, r.report()
		r.report3(c.Report)
		c.Report.Capped = true
		c.Report.Chunked = code == opReportCappedChunked
	case opClaimFair, opReport3, opWorkerHeartbeatProgress, opHeartbeatProgress:
		if ProtocolVersion < 3 { // as a binary before the codes
			r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", code))
			return
		}
		r.cmd3(c, code)
	case opReportChunked, opExpireChunked:
		if ProtocolVersion < ProtocolCascade { // as a binary before the codes
			r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", code))
			return
		}
		r.cmdChunked(c, code)
	case opClaimCapped:
		r.claimCapped(c)
	case opClaimBounded:
		r.claimBounded(c)
	case opClaimAck:
		r.claimAck(c)
	default:
		r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", code))
	}
}

// cmdChunked reads a command of an op code of ProtocolCascade.
func (r *entryReader) cmdChunked(c *Cmd, code byte) {
	if code == opExpireChunked {
		c.Op, c.Expire = OpExpire, r.expire()
		c.Expire.Chunked = true
		return
	}
	c.Op, c.Report = OpReport, r.report()
	c.Report.Token = r.Str()
	c.Report.RateLimitedFor, c.Report.SnoozeFor = r.Varint(), r.Varint()
	c.Report.Result = r.payload()
	c.Report.Progress = r.progress()
	c.Report.Chunked = true
}

// cmd3 reads a command of an op code of protocol 3.
func (r *entryReader) cmd3(c *Cmd, code byte) {
	switch code {
	case opClaimFair:
		c.Op, c.Claim = OpClaim, r.claim()
		c.Claim.Token, c.Claim.Fenced, c.Claim.Seq = r.Str(), r.Bool(), r.Uvarint()
		c.Claim.Fair = true
	case opReport3:
		c.Op, c.Report = OpReport, r.report()
		r.report3(c.Report)
		if r.Err() == nil && !c.Report.backpressure() && !c.Report.progressed() {
			r.Fail(fmt.Sprintf("report of op code %d without its fields", code))
		}
	case opWorkerHeartbeatProgress:
		c.Op, c.WorkerHeartbeat = OpWorkerHeartbeat, r.workerHeartbeat()
		h := c.WorkerHeartbeat
		h.Token, h.ClaimsFrom, h.ClaimsTo = r.Str(), r.Uvarint(), r.Uvarint()
		for i := range h.Leases {
			h.Leases[i].Progress = r.progress()
		}
	case opHeartbeatProgress:
		c.Op, c.Heartbeat = OpHeartbeat, r.heartbeat()
		c.Heartbeat.Token = r.Str()
		if c.Heartbeat.Progress = r.progress(); r.Err() == nil && c.Heartbeat.Progress == nil {
			r.Fail(fmt.Sprintf("heartbeat of op code %d without its progress", code))
		}
	}
}

// report3 reads what op code opReport3 (and opReportCapped) adds to a
// report.
func (r *entryReader) report3(rep *Report) {
	rep.Token = r.Str()
	rep.RateLimitedFor, rep.SnoozeFor = r.Varint(), r.Varint()
	rep.Result = r.payload()
	rep.Progress = r.progress()
}

// jsonCmd reads a command of op code 0. One of an op with a code of its own
// is refused: Encode never writes it, and JSON would not read it back the
// same (an empty list is not nil).
func (r *entryReader) jsonCmd(c *Cmd) {
	v := r.Raw()
	if r.Err() != nil {
		return
	}
	if err := json.Unmarshal(v, c); err != nil {
		r.Fail(fmt.Sprintf("command JSON: %v", err))
		return
	}
	if hasCode(c.Op) {
		r.Fail(fmt.Sprintf("op %q written as JSON, not in its own layout", c.Op))
	}
	if r.cappedJSONCmd(c) {
		return
	}
	if c.Op == OpDelete || c.Op == deleteKept {
		r.deleteCmd(c)
		return
	}
	if c.Op == OpPutSchedule || c.Op == putScheduleCapped {
		r.putScheduleCmd(c)
		return
	}
	if c.Op == OpSetQueueLimits || c.Op == setQueueLimitsWeighted || c.Op == setQueueLimitsPauses {
		r.queueLimitsCmd(c)
		return
	}
	for op, name := range fencedJSONOps {
		if c.Op == name {
			c.Op = op
			if c.fenceToken() == "" {
				r.Fail(fmt.Sprintf("op %q without its token", name))
			}
		}
	}
	r.tracedJSONCmd(c)
}

// tracedJSONCmd reads an op name of tracedJSONOps back as its op, which
// must then carry its trace, and refuses a trace under the plain name
// (which Encode never writes, and a node of protocol 2 would drop).
// Cmd.valid then refuses the trace where ProtocolVersion < ProtocolTrace.
func (r *entryReader) tracedJSONCmd(c *Cmd) {
	if name, ok := tracedJSONOps[c.Op]; ok && c.traced() {
		r.Fail(fmt.Sprintf("op %q with a trace, not written under %q", c.Op, name))
		return
	}
	for op, name := range tracedJSONOps {
		if c.Op == name {
			c.Op = op
			if !c.traced() {
				r.Fail(fmt.Sprintf("op %q without its trace", name))
			}
			return
		}
	}
}

// progress reads what appendProgress wrote: nil when not set.
func (r *entryReader) progress() *LeaseProgress {
	if !r.Bool() {
		return nil
	}
	return &LeaseProgress{Percent: r.Int(), Message: r.Str()}
}

// payload reads a Payload, which must be JSON.
func (r *entryReader) payload() json.RawMessage { return readPayload(&r.Reader) }

// readPayload reads a Payload, which must be JSON; nil when empty.
func readPayload(r *binenc.Reader) json.RawMessage {
	v := r.Raw()
	if len(v) == 0 {
		return nil
	}
	if !json.Valid(v) {
		r.Fail("payload is not JSON")
		return nil
	}
	return append(json.RawMessage(nil), v...)
}

func (r *entryReader) claim() *Claim {
	return &Claim{
		WorkerID: r.Str(),
		Queues:   r.Strings(),
		Types:    r.Strings(),
		Shell:    r.Bool(),
		Max:      r.Int(),
		LeaseTTL: r.Varint(),
	}
}

func (r *entryReader) heartbeat() *Heartbeat {
	return &Heartbeat{JobID: r.Str(), Lease: r.Uvarint(), LeaseTTL: r.Varint()}
}

func (r *entryReader) workerHeartbeat() *WorkerHeartbeat {
	h := &WorkerHeartbeat{WorkerID: r.Str(), LeaseTTL: r.Varint(), Listed: r.Bool()}
	if n := r.Count(minLeaseRefLen); n > 0 {
		h.Leases = make([]LeaseRef, n)
	}
	for i := range h.Leases {
		h.Leases[i] = LeaseRef{JobID: r.Str(), Lease: r.Uvarint()}
	}
	return h
}

func (r *entryReader) report() *Report {
	return &Report{
		JobID:    r.Str(),
		Lease:    r.Uvarint(),
		Success:  r.Bool(),
		ExitCode: r.IntPtr(),
		Output:   r.Str(),
		Error:    r.Str(),
		Final:    r.Bool(),
		Draw:     r.Float(),
	}
}

func (r *entryReader) expire() *Expire {
	return &Expire{JobID: r.Str(), Lease: r.Uvarint(), Draw: r.Float()}
}
