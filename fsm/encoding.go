package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/workron/workron/internal/binenc"
)

// How log entries are encoded.
//
// An entry's first byte is its encoding version. Version 1 (encodingJSON)
// is JSON of Entry: Workron wrote it until binary entries came, and Decode
// still reads it, for the entries that Raft logs hold. Version 2
// (EncodingVersion), which Encode writes, is binary, because every node
// decodes every entry: it decodes several times faster than JSON, and a
// batch of reports over ten times (BenchmarkDecode). It is, in this order:
//
//	EncodingVersion
//	Now
//	the count of commands, then each command: its op code (one byte),
//	then its argument
//
// and nothing after. The op codes, append only, and their arguments:
//
//	0 (opJSON), any op without a code of its own: the whole Cmd as JSON,
//	length-prefixed, so that a new op needs nothing here
//	1 submit: the count of jobs, then each NewJob, its fields in the order
//	submitCodec.job walks them (submit_codec.go: one walk writes and reads
//	them)
//	2 claim: WorkerID, Queues, Types, Shell, Max, LeaseTTL
//	3 heartbeat: JobID, Lease, LeaseTTL
//	4 worker_heartbeat: WorkerID, LeaseTTL, Listed, the count of Leases,
//	then each JobID, Lease
//	5 report: JobID, Lease, Success, ExitCode, Output, Error, Final, Draw
//	6 expire: JobID, Lease, Draw
//	7 claim of ProtocolFence: as 2, then Token, Fenced, Seq
//	8 heartbeat of ProtocolFence: as 3, then Token
//	9 worker_heartbeat of ProtocolFence: as 4, then Token, ClaimsFrom,
//	ClaimsTo
//	10 report of ProtocolFence: as 5, then Token
//	11 submit of ProtocolFlow: as 1, each NewJob followed by its
//	ConcurrencyKey
//	12 claim of protocol 3 (ProtocolFair): as 7, of a claim whose Fair
//	is set
//	13 report of protocol 3 (ProtocolBackpressure, ProtocolProgress): as
//	10, then RateLimitedFor, SnoozeFor, Result (as Payload), then a bool
//	(Progress set), then if set Percent, Message
//	14 worker_heartbeat of ProtocolProgress: as 9, then for each of
//	Leases in order a bool (Progress set), then if set Percent, Message
//	15 submit of ProtocolTrace: as 11, each NewJob followed by its
//	ConcurrencyKey, then its TraceParent
//	16 heartbeat of ProtocolProgress: as 8, then a bool (Progress set),
//	then if set Percent, Message
//	17 report of ProtocolPauses: as 13, of a report whose Capped is set
//	(pause.go's bounds)
//	18 report of both: as 13, of a report whose Capped and Chunked are set
//	(opReportCappedChunked)
//	19 claim of ProtocolWorkerCap (opClaimCapped, workercap.go): as 7,
//	then Fair, MaxWorkers
//	20 claim of ProtocolClaimBytes (opClaimBounded, claim_bytes.go): as
//	19 (MaxWorkers may be 0), then MaxBytes
//	21 report of ProtocolCascade (cascade.go): as 13, of a report whose
//	Chunked is set (opReportChunked)
//	22 expire of ProtocolCascade: as 6, of an expire whose Chunked is set
//	(opExpireChunked)
//	23 claim of ProtocolAck (opClaimAck, ack.go), a claim whose Ack is
//	set: the claim as it is written without Ack, its own op code (2, 7,
//	12 or a later claim's) included
//
// Encode writes code 12 only for a Fair claim; code 13 only for a report
// that sets RateLimitedFor, SnoozeFor, Result or Progress; code 14 only for
// a worker heartbeat one of whose leases carries progress. A
// set_queue_limits whose limits have KeyWeights is written (as JSON) under
// the op name setQueueLimitsWeighted, so that a node of protocol 2 stops at
// it; one whose limits set PauseQueue or MaxPause under
// setQueueLimitsPauses, so that a node of protocol 3 does.
//
// Encode writes code 15 only for a submit one of whose jobs has a
// TraceParent, and code 11 only for a submit one of whose jobs has a
// ConcurrencyKey; code 16 only for a heartbeat that carries progress. A
// submit_gang whose template has a TraceParent, and a fire that has one,
// are written (as JSON) under the op names tracedJSONOps gives, so that a
// node of protocol 2 stops at them rather than drop the trace; Decode
// refuses either under its plain name with a trace.
//
// A claim that carries MaxBytes (ProtocolClaimBytes) is written with op
// code 20 (opClaimBounded, claim_bytes.go), so that a node of
// protocol 3 stops at it; Decode refuses a claim as JSON under its own name.
//
// Encode writes codes 7 to 10 only for a command whose fields of
// ProtocolFence are set, so one without them gives the bytes it always
// did. Of the ops written as JSON, register, checkpoint and preempted are
// written under the op names fencedJSONOps gives when their Token is set,
// so that a node too old to know the field stops at the entry rather than
// dropping it.
//
// Values are written as package binenc says. Every integer, times and
// durations included, is a varint (a uvarint when unsigned); Jitter and
// Draw are their 8 bytes, exactly; ExitCode is a bool (set), then if set a
// varint; a map is written in key order, so that one entry always gives the
// same bytes. What JSON guaranteed still holds: an empty list, map or
// Payload reads back as nil; every string is UTF-8 (Encode replaces each
// byte that is not with U+FFFD, as encoding/json did, and Decode refuses
// one); a Payload is JSON (Encode and Decode refuse one that is not), now
// carried as written rather than compacted.
//
// A coded op is written with its own argument only, and Decode checks that
// every command has its argument (Cmd.valid). Changing a coded op's layout
// (a new field in NewJob, say) takes a new op code, the old one still read:
// a node that does not know the code stops at the entry and says to
// upgrade, rather than dropping the field. TestEncoding's
// EveryFieldRoundTrips fails on a field that is not written, and
// TestSubmitBytesArePinned on a change to the bytes of a submit.

// EncodingVersion is the first byte of every log entry this package writes.
// A node that reads an entry of a newer version stops (see Decode) instead of
// applying something it does not understand and diverging.
const EncodingVersion byte = 2

// encodingJSON is the version of JSON entries, which Decode still reads.
const encodingJSON byte = 1

// Op codes of version 2; append only.
const (
	opJSON byte = iota
	opSubmit
	opClaim
	opHeartbeat
	opWorkerHeartbeat
	opReport
	opExpire
	opClaimFence
	opHeartbeatFence
	opWorkerHeartbeatFence
	opReportFence
	opSubmitKeyed
	opClaimFair
	opReport3
	opWorkerHeartbeatProgress
	opSubmitTraced
	opHeartbeatProgress
)

// setQueueLimitsWeighted is the op name of a set_queue_limits that sets
// KeyWeights (ProtocolFair).
const setQueueLimitsWeighted Op = "set_queue_limits_w"

// ProtocolFence is the protocol version that understands the fields of
// issue #14 (who claimed an attempt, and how) and of lost claims: op codes
// opClaimFence to opReportFence and the op names of fencedJSONOps. A
// leader proposes commands with those fields set only when every voter
// speaks it.
const ProtocolFence = 2

// fencedJSONOps are the names under which Encode writes a JSON op whose
// Token is set; Decode reads them back as the op itself.
var fencedJSONOps = map[Op]Op{
	OpRegister:   "register_fence",
	OpCheckpoint: "checkpoint_fence",
	OpPreempted:  "preempted_fence",
}

// tracedJSONOps are the names under which Encode writes a JSON op that
// carries a trace (ProtocolTrace); Decode reads them back as the op itself.
var tracedJSONOps = map[Op]Op{
	OpSubmitGang: "submit_gang_traced",
	OpFire:       "fire_traced",
}

// Least encoded sizes, so that a count can be checked against the bytes
// left before anything is allocated: fields of at least one byte each, and
// 8 for a float.
const (
	minCmdLen      = 2 // op code, and a submit of no jobs
	minNewJobLen   = 24 + 8
	minLeaseRefLen = 2
)

// Encode turns an entry into log bytes, in version EncodingVersion. It
// fails on a command without its argument (see Cmd.valid), a float that is
// not a number, or a Payload that is not JSON, none of which the API
// proposes.
func Encode(e *Entry) ([]byte, error) {
	b := make([]byte, 0, sizeHint(e))
	b = append(b, EncodingVersion)
	b = binenc.AppendVarint(b, e.Now)
	b = binenc.AppendUvarint(b, uint64(len(e.Cmds)))
	for i := range e.Cmds {
		c := &e.Cmds[i]
		var err error
		if b, err = appendCmd(b, c); err != nil {
			return nil, fmt.Errorf("encode entry: command %d (%q): %w", i, c.Op, err)
		}
	}
	if spare := cap(b) - len(b); spare > 256 && spare > len(b)/8 {
		b = bytes.Clone(b) // Raft's log cache keeps the bytes, and any spare room
	}
	return b, nil
}

// sizeHint guesses the size of e's bytes, so that Encode allocates them
// about once.
func sizeHint(e *Entry) int {
	n := 16
	for i := range e.Cmds {
		switch c := &e.Cmds[i]; {
		case c.Op == OpSubmit && c.Submit != nil:
			for k := range c.Submit.Jobs {
				j := &c.Submit.Jobs[k]
				n += 48 + len(j.ID) + len(j.Command) + len(j.Type) + len(j.Payload) + len(j.Queue) + len(j.IdempotencyKey) + len(j.TraceParent) +
					16*(len(j.Env)+len(j.Metadata)+len(j.DependsOn)+len(j.Tags))
			}
		case c.Op == OpReport && c.Report != nil:
			n += 32 + len(c.Report.JobID) + len(c.Report.Output) + len(c.Report.Error) + len(c.Report.Result)
		default:
			n += 64
		}
	}
	return n
}

func appendCmd(b []byte, c *Cmd) ([]byte, error) {
	if !c.valid() {
		return nil, errors.New("lacks its arguments or is unknown")
	}
	switch c.Op {
	case OpSubmit:
		return appendSubmit(b, c.Submit)
	case OpClaim:
		if c.Claim.Ack {
			b = append(b, opClaimAck) // then the claim as it is written without
		}
		return appendClaim(b, c.Claim), nil
	case OpHeartbeat:
		return appendHeartbeat(b, c.Heartbeat), nil
	case OpWorkerHeartbeat:
		return appendWorkerHeartbeat(b, c.WorkerHeartbeat), nil
	case OpReport:
		return appendReport(b, c.Report)
	case OpExpire:
		return appendExpire(append(b, codeFor(c.Expire.Chunked, opExpire, opExpireChunked)), c.Expire)
	}
	if c.Op == OpRegister && c.capped() {
		alias := *c
		alias.Op = registerCapped // a register's newest name, token or not
		c = &alias
	} else if name, ok := fencedJSONOps[c.Op]; ok && c.fenceToken() != "" {
		alias := *c
		alias.Op = name
		c = &alias
	}
	if name, ok := tracedJSONOps[c.Op]; ok && c.traced() {
		alias := *c
		alias.Op = name
		c = &alias
	}
	if c.kept() {
		alias := *c
		alias.Op = deleteKept
		c = &alias
	}
	if c.scheduleCapped() {
		alias := *c
		alias.Op = putScheduleCapped
		c = &alias
	}
	if name := c.queueLimitsName(); name != c.Op {
		alias := *c
		alias.Op = name
		c = &alias
	}
	v, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return binenc.AppendBytes(append(b, opJSON), v), nil
}

// hasCode reports whether op has a binary layout of its own.
func hasCode(op Op) bool {
	switch op {
	case OpSubmit, OpClaim, OpHeartbeat, OpWorkerHeartbeat, OpReport, OpExpire:
		return true
	}
	return false
}

// codeFor is a coded op's code: the newer one when the command sets one of
// the fields of a later protocol, else the one it always had.
func codeFor(fence bool, plain, fenced byte) byte {
	if fence {
		return fenced
	}
	return plain
}

// fenceToken is the Token of a JSON op of fencedJSONOps.
func (c *Cmd) fenceToken() string {
	switch {
	case c.Op == OpRegister && c.Register != nil:
		return c.Register.Token
	case c.Op == OpCheckpoint && c.Checkpoint != nil:
		return c.Checkpoint.Token
	case c.Op == OpPreempted && c.Preempted != nil:
		return c.Preempted.Token
	}
	return ""
}

func appendClaim(b []byte, c *Claim) []byte {
	bounded := c.MaxBytes != 0
	capped := c.MaxWorkers != 0 || bounded
	fence := c.fenced() || c.Fair || capped
	code := codeFor(fence, opClaim, opClaimFence)
	switch {
	case bounded:
		code = opClaimBounded
	case capped:
		code = opClaimCapped
	case c.Fair:
		code = opClaimFair
	}
	b = appendText(append(b, code), c.WorkerID)
	b = appendTexts(b, c.Queues)
	b = appendTexts(b, c.Types)
	b = binenc.AppendBool(b, c.Shell)
	b = binenc.AppendInt(b, c.Max)
	b = binenc.AppendVarint(b, c.LeaseTTL)
	if fence {
		b = appendText(b, c.Token)
		b = binenc.AppendBool(b, c.Fenced)
		b = binenc.AppendUvarint(b, c.Seq)
	}
	if capped {
		b = binenc.AppendBool(b, c.Fair)
		b = binenc.AppendInt(b, c.MaxWorkers)
	}
	if bounded {
		b = binenc.AppendVarint(b, c.MaxBytes)
	}
	return b
}

func appendHeartbeat(b []byte, h *Heartbeat) []byte {
	progress := h.Progress != nil
	fence := progress || h.fenced()
	code := codeFor(fence, opHeartbeat, opHeartbeatFence)
	b = appendText(append(b, codeFor(progress, code, opHeartbeatProgress)), h.JobID)
	b = binenc.AppendUvarint(b, h.Lease)
	b = binenc.AppendVarint(b, h.LeaseTTL)
	if fence {
		b = appendText(b, h.Token)
	}
	if progress {
		b = appendProgress(b, h.Progress)
	}
	return b
}

func appendWorkerHeartbeat(b []byte, h *WorkerHeartbeat) []byte {
	progress := h.progressed()
	fence := progress || h.fenced()
	code := codeFor(fence, opWorkerHeartbeat, opWorkerHeartbeatFence)
	b = appendText(append(b, codeFor(progress, code, opWorkerHeartbeatProgress)), h.WorkerID)
	b = binenc.AppendVarint(b, h.LeaseTTL)
	b = binenc.AppendBool(b, h.Listed)
	b = binenc.AppendUvarint(b, uint64(len(h.Leases)))
	for _, l := range h.Leases {
		b = appendText(b, l.JobID)
		b = binenc.AppendUvarint(b, l.Lease)
	}
	if fence {
		b = appendText(b, h.Token)
		b = binenc.AppendUvarint(b, h.ClaimsFrom)
		b = binenc.AppendUvarint(b, h.ClaimsTo)
	}
	if progress {
		b = appendLeaseProgress(b, h.Leases)
	}
	return b
}

func appendReport(b []byte, r *Report) ([]byte, error) {
	if !binenc.Finite(r.Draw) {
		return nil, fmt.Errorf("draw %v is not a number", r.Draw)
	}
	if len(r.Result) > 0 && !json.Valid(r.Result) {
		return nil, fmt.Errorf("result is not JSON")
	}
	v3 := r.backpressure() || r.progressed() || r.Capped || r.Chunked
	fence := v3 || r.fenced()
	code := codeFor(fence, opReport, opReportFence)
	code = codeFor(v3, code, opReport3)
	switch {
	case r.Capped && r.Chunked:
		code = opReportCappedChunked
	case r.Capped:
		code = opReportCapped
	case r.Chunked:
		code = opReportChunked
	}
	b = appendText(append(b, code), r.JobID)
	b = binenc.AppendUvarint(b, r.Lease)
	b = binenc.AppendBool(b, r.Success)
	b = binenc.AppendIntPtr(b, r.ExitCode)
	b = appendText(b, r.Output)
	b = appendText(b, r.Error)
	b = binenc.AppendBool(b, r.Final)
	b = binenc.AppendFloat(b, r.Draw)
	if fence {
		b = appendText(b, r.Token)
	}
	if v3 {
		b = binenc.AppendVarint(b, r.RateLimitedFor)
		b = binenc.AppendVarint(b, r.SnoozeFor)
		b = binenc.AppendBytes(b, r.Result)
		b = appendProgress(b, r.Progress)
	}
	return b, nil
}

// appendLeaseProgress appends the progress of each of leases: a bool, then
// if set Percent and Message.
func appendLeaseProgress(b []byte, leases []LeaseRef) []byte {
	for _, l := range leases {
		b = appendProgress(b, l.Progress)
	}
	return b
}

// appendProgress appends an optional progress: a bool (set), then if set
// Percent and Message.
func appendProgress(b []byte, p *LeaseProgress) []byte {
	b = binenc.AppendBool(b, p != nil)
	if p != nil {
		b = binenc.AppendInt(b, p.Percent)
		b = appendText(b, p.Message)
	}
	return b
}

func appendExpire(b []byte, x *Expire) ([]byte, error) {
	if !binenc.Finite(x.Draw) {
		return nil, fmt.Errorf("draw %v is not a number", x.Draw)
	}
	b = appendText(b, x.JobID)
	b = binenc.AppendUvarint(b, x.Lease)
	return binenc.AppendFloat(b, x.Draw), nil
}

// appendText appends s as validUTF8 makes it.
func appendText(b []byte, s string) []byte {
	return binenc.AppendString(b, validUTF8(s))
}

// appendTexts appends ss as binenc.AppendStrings does, its strings as
// validUTF8 makes them.
func appendTexts(b []byte, ss []string) []byte {
	if slices.ContainsFunc(ss, notUTF8) {
		clean := make([]string, len(ss))
		for i, s := range ss {
			clean[i] = validUTF8(s)
		}
		ss = clean
	}
	return binenc.AppendStrings(b, ss)
}

// appendTextMap appends m as binenc.AppendMap does, its strings as
// validUTF8 makes them.
func appendTextMap(b []byte, m map[string]string) []byte {
	for k, v := range m {
		if notUTF8(k) || notUTF8(v) {
			return binenc.AppendMap(b, validUTF8Map(m))
		}
	}
	return binenc.AppendMap(b, m)
}

func notUTF8(s string) bool { return !utf8.ValidString(s) }

// validUTF8 returns s with each byte that is not UTF-8 replaced with U+FFFD,
// as encoding/json wrote it (a job id from a URL path can hold any byte).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var t strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			t.WriteRune(utf8.RuneError)
		} else {
			t.WriteString(s[i : i+n])
		}
		i += n
	}
	return t.String()
}

// validUTF8Map returns a copy of m with its strings made valid UTF-8. Of
// keys that are then the same, the greatest before keeps its value, as when
// JSON wrote them in key order and read the last.
func validUTF8Map(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[validUTF8(k)] = validUTF8(m[k])
	}
	return out
}
