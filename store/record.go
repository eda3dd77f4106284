package store

import (
	"encoding/json"
	"fmt"

	"github.com/workron/workron/internal/binenc"
)

// How records are encoded.
//
// Job records, the hot ones (every submit, claim and report reads and writes
// them, and a start reads them all), are binary; the few and cold ones
// (workers, nodes, gangs, schedules) are JSON. State format 1 wrote every
// record as JSON: Open rewrites its job records in binary (upgrade.go), and
// decodeJob still reads a job record as JSON when its first byte is '{'.
//
// A binary job record is, in this order:
//
//	jobRecordV1 (0x01: no JSON document starts with it)
//	head, what the FSM's in-memory indexes need (JobHead), so that
//	decodeJobHead stops early: ID, Seq, Status, Queue, Type, Priority,
//	RunAt, WorkerID, Lease, LeaseDeadline, Resources (VRAMMB, MemoryMB,
//	CPUMillis, Slots), Tags
//	body: Command, Payload, Env, Metadata, DependsOn, Waiting, Dependents,
//	MaxAttempts, Attempts, IdempotencyKey, Timeout, Backoff (Base, Max,
//	Jitter), CreatedAt, StartedAt, DoneAt, ExitCode, Output, LastError,
//	History, Retention, UniqueFor, ExpireAt, Schedule, ScheduledFor, After,
//	GangID, GangIndex, GangSize, PreemptEpoch, ModifyIndex
//	then, in a record of jobRecordV2 only: ClaimToken, Fenced, ClaimSeq
//
// and nothing after. A record of jobRecordV3 (0x03) is the first byte, then
// ConcurrencyKey (before the head, so that decodeJobHead reads it), then
// the head and body as above, then ClaimToken, Fenced, ClaimSeq always. A
// record of jobRecordV4 (0x04) is a V3 record with that first byte, then
// TraceParent, Progress (a bool, set, then if set Percent, Message, At),
// and Result (as Payload). A record of jobRecordV5 (0x05) is a V4 record
// with that first byte, then AwaitingAck (a bool) and Unacked. Values are written as package binenc says: a time (a
// field named At, Deadline, Started or Ended; Unix nanoseconds) is 8 bytes
// little-endian; other unsigned integers are uvarints, signed ones varints;
// a string, or Payload, is its length as a uvarint then its bytes (length 0
// reads back as nil Payload); a list is a uvarint count then its items; a
// map is a count then key, value pairs in key order, so one Job always gives
// the same bytes; a bool is one byte 0 or 1; ExitCode is a bool (set) then,
// if set, a varint; Jitter is its IEEE 754 bits, 8 bytes little-endian. A
// Status is a uvarint code (statusCodes), 0 followed by the string for one
// outside the table. Each Attempt of History is Attempt, WorkerID, Lease,
// Status, ExitCode, Error, Started, Ended, Expired.
//
// A record is written as jobRecordV2 only when one of the fields that V2
// adds is set, so a job claimed without them gives the bytes it always did;
// as jobRecordV3 only when the job has a ConcurrencyKey, which only a
// submit of protocol 2 gives (the same unreleased protocol and state
// format as V2, so format 3 covers it).
// V2 records need a state format that says so (currentFormat 3): a node too
// old to read them must not open the file. Changing this layout again needs
// a new first byte, with V1 and V2 still read. A record is written as
// jobRecordV4 only when TraceParent, Progress or Result is set, which only
// commands of protocol 3 give: those are proposed only once every member
// runs protocol 3, so a node that cannot read V4 never meets one (a
// downgrade after the upgrade has finished is not supported: its start
// refuses the record as written by a newer Workron). Likewise a record is
// written as jobRecordV5 only when AwaitingAck or Unacked is set, which
// only claims of protocol 4 give.

// interner hands out one string per distinct value, so that a scan of many
// records (rebuilding the indexes) allocates each queue, type and worker name
// once, and the indexes hold one copy of it. A nil interner allocates every
// time.
type interner = binenc.Interner

// The first bytes of binary job records.
const (
	jobRecordV1 = 0x01
	jobRecordV2 = 0x02 // V1, then how the last attempt was claimed
	jobRecordV3 = 0x03 // the concurrency key, then V2
	jobRecordV4 = 0x04 // V3, then TraceParent, Progress, Result
	jobRecordV5 = 0x05 // V4, then AwaitingAck, Unacked
)

// statusCodes numbers the statuses in binary records; append only.
var statusCodes = [...]Status{1: StatusBlocked, StatusPending, StatusReserved, StatusRunning, StatusCancelling, StatusDone, StatusFailed, StatusCancelled}

// minAttemptLen is the least bytes an Attempt takes (nine fields of at
// least one byte), so that a count read from a record can be checked
// against the bytes left before anything is allocated.
const minAttemptLen = 9

// encodeJSON encodes a cold record (not a job).
func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// decodeJSON decodes a cold record, or a job record of state format 1.
func decodeJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}

// appendJob appends j's binary record to b. It fails only on a Jitter that
// is not a finite number, which JSON refused too.
func appendJob(b []byte, j *Job) ([]byte, error) {
	if !binenc.Finite(j.Backoff.Jitter) {
		return nil, fmt.Errorf("encode job %s: backoff jitter %v is not a number", j.ID, j.Backoff.Jitter)
	}
	v5 := j.AwaitingAck || j.Unacked != 0
	v4 := v5 || j.TraceParent != "" || j.Progress != nil || j.Result != nil
	v3 := v4 || j.ConcurrencyKey != ""
	v2 := v3 || j.ClaimToken != "" || j.Fenced || j.ClaimSeq != 0
	switch {
	case v5:
		b = binenc.AppendString(append(b, jobRecordV5), j.ConcurrencyKey)
	case v4:
		b = binenc.AppendString(append(b, jobRecordV4), j.ConcurrencyKey)
	case v3:
		b = binenc.AppendString(append(b, jobRecordV3), j.ConcurrencyKey)
	case v2:
		b = append(b, jobRecordV2)
	default:
		b = append(b, jobRecordV1)
	}
	h := j.Head()
	b = appendJobHead(b, &h)
	b = appendJobBody(b, j)
	if v2 {
		b = binenc.AppendString(b, j.ClaimToken)
		b = binenc.AppendBool(b, j.Fenced)
		b = binenc.AppendUvarint(b, j.ClaimSeq)
	}
	if v4 {
		b = binenc.AppendString(b, j.TraceParent)
		b = binenc.AppendBool(b, j.Progress != nil)
		if p := j.Progress; p != nil {
			b = binenc.AppendInt(b, p.Percent)
			b = binenc.AppendString(b, p.Message)
			b = binenc.AppendTime(b, p.At)
		}
		b = binenc.AppendBytes(b, j.Result)
	}
	if v5 {
		b = binenc.AppendBool(b, j.AwaitingAck)
		b = binenc.AppendInt(b, j.Unacked)
	}
	return b, nil
}

func appendJobHead(b []byte, h *JobHead) []byte {
	b = binenc.AppendString(b, h.ID)
	b = binenc.AppendUvarint(b, h.Seq)
	b = appendStatus(b, h.Status)
	b = binenc.AppendString(b, h.Queue)
	b = binenc.AppendString(b, h.Type)
	b = binenc.AppendInt(b, h.Priority)
	b = binenc.AppendTime(b, h.RunAt)
	b = binenc.AppendString(b, h.WorkerID)
	b = binenc.AppendUvarint(b, h.Lease)
	b = binenc.AppendTime(b, h.LeaseDeadline)
	b = binenc.AppendInt(b, h.Resources.VRAMMB)
	b = binenc.AppendInt(b, h.Resources.MemoryMB)
	b = binenc.AppendInt(b, h.Resources.CPUMillis)
	b = binenc.AppendInt(b, h.Resources.Slots)
	return binenc.AppendStrings(b, h.Tags)
}

func appendJobBody(b []byte, j *Job) []byte {
	b = binenc.AppendString(b, j.Command)
	b = binenc.AppendBytes(b, j.Payload)
	b = binenc.AppendMap(b, j.Env)
	b = binenc.AppendMap(b, j.Metadata)
	b = binenc.AppendStrings(b, j.DependsOn)
	b = binenc.AppendInt(b, j.Waiting)
	b = binenc.AppendStrings(b, j.Dependents)
	b = binenc.AppendInt(b, j.MaxAttempts)
	b = binenc.AppendInt(b, j.Attempts)
	b = binenc.AppendString(b, j.IdempotencyKey)
	b = binenc.AppendVarint(b, j.Timeout)
	b = binenc.AppendVarint(b, j.Backoff.Base)
	b = binenc.AppendVarint(b, j.Backoff.Max)
	b = binenc.AppendFloat(b, j.Backoff.Jitter) // -0 is 0, as in JSON
	b = binenc.AppendTime(b, j.CreatedAt)
	b = binenc.AppendTime(b, j.StartedAt)
	b = binenc.AppendTime(b, j.DoneAt)
	b = binenc.AppendIntPtr(b, j.ExitCode)
	b = binenc.AppendString(b, j.Output)
	b = binenc.AppendString(b, j.LastError)
	b = binenc.AppendUvarint(b, uint64(len(j.History)))
	for i := range j.History {
		b = appendAttempt(b, &j.History[i])
	}
	b = binenc.AppendVarint(b, j.Retention)
	b = binenc.AppendVarint(b, j.UniqueFor)
	b = binenc.AppendTime(b, j.ExpireAt)
	b = binenc.AppendString(b, j.Schedule)
	b = binenc.AppendTime(b, j.ScheduledFor)
	b = binenc.AppendString(b, j.After)
	b = binenc.AppendString(b, j.GangID)
	b = binenc.AppendInt(b, j.GangIndex)
	b = binenc.AppendInt(b, j.GangSize)
	b = binenc.AppendUvarint(b, j.PreemptEpoch)
	return binenc.AppendUvarint(b, j.ModifyIndex)
}

func appendAttempt(b []byte, a *Attempt) []byte {
	b = binenc.AppendInt(b, a.Attempt)
	b = binenc.AppendString(b, a.WorkerID)
	b = binenc.AppendUvarint(b, a.Lease)
	b = appendStatus(b, a.Status)
	b = binenc.AppendIntPtr(b, a.ExitCode)
	b = binenc.AppendString(b, a.Error)
	b = binenc.AppendTime(b, a.Started)
	b = binenc.AppendTime(b, a.Ended)
	return binenc.AppendBool(b, a.Expired)
}

func appendStatus(b []byte, s Status) []byte {
	for code := 1; code < len(statusCodes); code++ {
		if statusCodes[code] == s {
			return binenc.AppendUvarint(b, uint64(code))
		}
	}
	return binenc.AppendString(binenc.AppendUvarint(b, 0), string(s))
}

// decodeJob decodes a job record, binary or (state format 1) JSON, into j.
// Strings are copied out of b. It fails, without allocating more than a
// small multiple of len(b), on bytes that are not a whole record.
func decodeJob(b []byte, j *Job) error {
	if len(b) > 0 && b[0] == '{' {
		return decodeJSON(b, j)
	}
	r, err := jobReader(b)
	if err != nil {
		return err
	}
	var h JobHead
	r.jobHead(&h)
	j.setHead(&h)
	r.jobBody(j)
	if r.version >= jobRecordV2 {
		j.ClaimToken = r.Str()
		j.Fenced = r.Bool()
		j.ClaimSeq = r.Uvarint()
	}
	if r.version >= jobRecordV4 {
		j.TraceParent = r.Str()
		if r.Bool() {
			j.Progress = &Progress{Percent: r.Int(), Message: r.Str(), At: r.Time()}
		}
		j.Result = r.Bytes()
	}
	if r.version >= jobRecordV5 {
		j.AwaitingAck = r.Bool()
		j.Unacked = r.Int()
	}
	if err := r.End(); err != nil {
		return fmt.Errorf("decode job: %w", err)
	}
	return nil
}

// decodeJobHead decodes only the head of a job record into h, reading no
// further than the head of a binary record. Names (queue, type, worker) are
// taken from, or added to, names; nil allocates each.
func decodeJobHead(b []byte, h *JobHead, names interner) error {
	if len(b) > 0 && b[0] == '{' {
		var j Job
		if err := decodeJSON(b, &j); err != nil {
			return err
		}
		*h = j.Head()
		return nil
	}
	r, err := jobReader(b)
	if err != nil {
		return err
	}
	r.names = names
	r.jobHead(h)
	if err := r.Err(); err != nil {
		return fmt.Errorf("decode job head: %w", err)
	}
	return nil
}

func jobReader(b []byte) (reader, error) {
	if len(b) == 0 {
		return reader{}, fmt.Errorf("decode job: empty record")
	}
	if b[0] < jobRecordV1 || b[0] > jobRecordV5 {
		return reader{}, fmt.Errorf("decode job: unknown record format %#x (written by a newer Workron?)", b[0])
	}
	r := reader{Reader: binenc.NewReader(b)}
	r.version = r.Byte()
	return r, nil
}

// reader reads a binary job record: binenc's Reader, with the job's own
// parts (statuses, attempts, shared names).
type reader struct {
	binenc.Reader
	names   interner // see name
	version byte     // the record's first byte
}

func (r *reader) jobHead(h *JobHead) {
	h.Key = "" // h may be a reused head (Tx.ForEachJobHead)
	if r.version >= jobRecordV3 {
		h.Key = r.name()
	}
	h.ID = r.Str()
	h.Seq = r.Uvarint()
	h.Status = r.status()
	h.Queue = r.name()
	h.Type = r.name()
	h.Priority = r.Int()
	h.RunAt = r.Time()
	h.WorkerID = r.name()
	h.Lease = r.Uvarint()
	h.LeaseDeadline = r.Time()
	h.Resources.VRAMMB = r.Int()
	h.Resources.MemoryMB = r.Int()
	h.Resources.CPUMillis = r.Int()
	h.Resources.Slots = r.Int()
	h.Tags = r.Strings()
}

func (r *reader) jobBody(j *Job) {
	j.Command = r.Str()
	j.Payload = r.Bytes()
	j.Env = r.StringMap()
	j.Metadata = r.StringMap()
	j.DependsOn = r.Strings()
	j.Waiting = r.Int()
	j.Dependents = r.Strings()
	j.MaxAttempts = r.Int()
	j.Attempts = r.Int()
	j.IdempotencyKey = r.Str()
	j.Timeout = r.Varint()
	j.Backoff.Base = r.Varint()
	j.Backoff.Max = r.Varint()
	j.Backoff.Jitter = r.Float()
	j.CreatedAt = r.Time()
	j.StartedAt = r.Time()
	j.DoneAt = r.Time()
	j.ExitCode = r.IntPtr()
	j.Output = r.Str()
	j.LastError = r.Str()
	j.History = r.history(j.WorkerID, j.LastError)
	j.Retention = r.Varint()
	j.UniqueFor = r.Varint()
	j.ExpireAt = r.Time()
	j.Schedule = r.Str()
	j.ScheduledFor = r.Time()
	j.After = r.Str()
	j.GangID = r.Str()
	j.GangIndex = r.Int()
	j.GangSize = r.Int()
	j.PreemptEpoch = r.Uvarint()
	j.ModifyIndex = r.Uvarint()
}

// history reads the attempts; those whose worker or error is the job's
// (often the last one's) share its string.
func (r *reader) history(worker, lastError string) []Attempt {
	n := r.Count(minAttemptLen)
	if n == 0 {
		return nil
	}
	out := make([]Attempt, n)
	for i := range out {
		a := &out[i]
		a.Attempt = r.Int()
		a.WorkerID = r.stringOr(worker)
		a.Lease = r.Uvarint()
		a.Status = r.status()
		a.ExitCode = r.IntPtr()
		a.Error = r.stringOr(lastError)
		a.Started = r.Time()
		a.Ended = r.Time()
		a.Expired = r.Bool()
	}
	return out
}

// name reads a string that many records share, a queue, type or worker
// name, through the reader's interner.
func (r *reader) name() string { return r.names.String(r.Raw()) }

// stringOr reads a string, returning same if it is equal.
func (r *reader) stringOr(same string) string {
	v := r.Raw()
	if string(v) == same {
		return same
	}
	return string(v)
}

func (r *reader) status() Status {
	code := r.Uvarint()
	switch {
	case code == 0:
		return Status(r.Str())
	case code < uint64(len(statusCodes)):
		return statusCodes[code]
	}
	r.Fail("unknown status code")
	return ""
}
