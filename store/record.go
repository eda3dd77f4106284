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
// A binary job record is its first byte (jobRecordV1 to V5: no JSON
// document starts with one), then the job's fields in the order jobCodec
// walks them, and nothing after. The walk is the one list of the fields:
// walkgen generates from it the writer and reader that appendJob and
// decodeJob run (record_gen.go: go generate ./store). In outline:
//
//	head (jobHead), what the FSM's in-memory indexes need (JobHead), so that
//	decodeJobHead stops early: ID to Tags, with the ConcurrencyKey first
//	from V3 on
//	body (job): Command to ModifyIndex
//	V2 on: ClaimToken, Fenced, ClaimSeq
//	V4 on: TraceParent, Progress (a bool, set, then if set Percent,
//	Message, At), Result (as Payload)
//	V5 on: AwaitingAck, Unacked
//
// Values are written as package binenc says: a time (Time in the walk;
// Unix nanoseconds) is 8 bytes little-endian; other unsigned integers are
// uvarints, signed ones varints; a string, or Payload, is its length as a
// uvarint then its bytes (length 0 reads back as nil Payload); a list is a
// uvarint count then its items; a map is a count then key, value pairs in
// key order, so one Job always gives the same bytes; a bool is one byte 0
// or 1; ExitCode is a bool (set) then, if set, a varint; Jitter is its IEEE
// 754 bits, 8 bytes little-endian. A Status is a uvarint code
// (statusCodes), 0 followed by the string for one outside the table. Each
// Attempt of History is as jobCodec.attempt walks it. Changing the layout
// (a new field) takes a new first byte, the old ones still read; the bytes
// of each version are pinned (TestJobRecordBytesArePinned),
// TestEveryJobFieldIsInTheRecord fails on a field of Job the walk misses,
// and TestJobCodecIsTheWalk on generated code that is not the walk's.
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
	v := recordVersion(j)
	w := jobWriter{version: v}
	return w.job(append(b, v), j), nil
}

// recordVersion is the first byte of j's record: the oldest version that
// holds every field j sets.
func recordVersion(j *Job) byte {
	switch {
	case j.AwaitingAck || j.Unacked != 0:
		return jobRecordV5
	case j.TraceParent != "" || j.Progress != nil || j.Result != nil:
		return jobRecordV4
	case j.ConcurrencyKey != "":
		return jobRecordV3
	case j.ClaimToken != "" || j.Fenced || j.ClaimSeq != 0:
		return jobRecordV2
	}
	return jobRecordV1
}

// jobCodec reads a job record, or writes one (binenc.Codec): its methods
// are the record's layout, each field once, for both. appendJob and
// decodeJob go through jobWriter's and jobReader's, which walkgen
// generates from them (record_gen.go), so that a field costs no call more
// than a hand-written codec's; TestJobCodecIsTheWalk checks that they
// write and read what the walk does.
type jobCodec struct {
	binenc.Codec
	names   interner // reading: see name
	version byte     // the record's first byte
}

//go:generate go run ../internal/tools/walkgen -in record.go -codec jobCodec -writer jobWriter -reader jobReader -out record_gen.go

// jobWriter writes a job record through the methods walkgen generates from
// jobCodec's (record_gen.go).
type jobWriter struct {
	binenc.Writer
	version byte
}

// jobReader reads a job record through the methods walkgen generates from
// jobCodec's (record_gen.go).
type jobReader struct {
	binenc.FieldReader
	names   interner // see jobCodec.name
	version byte     // the record's first byte
}

// job is a whole record after its first byte.
func (c *jobCodec) job(j *Job) {
	var h JobHead
	if !c.Reading() {
		h = j.Head()
	}
	c.jobHead(&h)
	if c.Reading() {
		j.setHead(&h)
	}
	c.String(&j.Command)
	c.Bytes((*[]byte)(&j.Payload))
	c.Map(&j.Env)
	c.Map(&j.Metadata)
	c.Strings(&j.DependsOn)
	c.Int(&j.Waiting)
	c.Strings(&j.Dependents)
	c.Int(&j.MaxAttempts)
	c.Int(&j.Attempts)
	c.String(&j.IdempotencyKey)
	c.Varint(&j.Timeout)
	c.Varint(&j.Backoff.Base)
	c.Varint(&j.Backoff.Max)
	c.Float(&j.Backoff.Jitter) // -0 is 0, as in JSON
	c.Time(&j.CreatedAt)
	c.Time(&j.StartedAt)
	c.Time(&j.DoneAt)
	c.IntPtr(&j.ExitCode)
	c.String(&j.Output)
	c.String(&j.LastError)
	c.history(j)
	c.Varint(&j.Retention)
	c.Varint(&j.UniqueFor)
	c.Time(&j.ExpireAt)
	c.String(&j.Schedule)
	c.Time(&j.ScheduledFor)
	c.String(&j.After)
	c.String(&j.GangID)
	c.Int(&j.GangIndex)
	c.Int(&j.GangSize)
	c.Uvarint(&j.PreemptEpoch)
	c.Uvarint(&j.ModifyIndex)
	if c.version >= jobRecordV2 {
		c.String(&j.ClaimToken)
		c.Bool(&j.Fenced)
		c.Uvarint(&j.ClaimSeq)
	}
	if c.version >= jobRecordV4 {
		c.String(&j.TraceParent)
		c.progress(&j.Progress)
		c.Bytes((*[]byte)(&j.Result))
	}
	if c.version >= jobRecordV5 {
		c.Bool(&j.AwaitingAck)
		c.Int(&j.Unacked)
	}
}

// jobHead is the head (JobHead), the ConcurrencyKey first from V3 on.
func (c *jobCodec) jobHead(h *JobHead) {
	if c.version >= jobRecordV3 {
		c.name(&h.Key)
	} else if c.Reading() {
		h.Key = "" // h may be a reused head (Tx.ForEachJobHead)
	}
	c.String(&h.ID)
	c.Uvarint(&h.Seq)
	c.status(&h.Status)
	c.name(&h.Queue)
	c.name(&h.Type)
	c.Int(&h.Priority)
	c.Time(&h.RunAt)
	c.name(&h.WorkerID)
	c.Uvarint(&h.Lease)
	c.Time(&h.LeaseDeadline)
	c.Int(&h.Resources.VRAMMB)
	c.Int(&h.Resources.MemoryMB)
	c.Int(&h.Resources.CPUMillis)
	c.Int(&h.Resources.Slots)
	c.Strings(&h.Tags)
}

// history is the attempts; read back, those whose worker or error is the
// job's (often the last one's) share its string.
func (c *jobCodec) history(j *Job) {
	n := len(j.History)
	c.Count(&n, minAttemptLen)
	if c.Reading() {
		j.History = nil
		if n > 0 {
			j.History = make([]Attempt, n)
		}
	}
	for i := range j.History {
		c.attempt(&j.History[i], j.WorkerID, j.LastError)
	}
}

func (c *jobCodec) attempt(a *Attempt, worker, lastError string) {
	c.Int(&a.Attempt)
	c.shared(&a.WorkerID, worker)
	c.Uvarint(&a.Lease)
	c.status(&a.Status)
	c.IntPtr(&a.ExitCode)
	c.shared(&a.Error, lastError)
	c.Time(&a.Started)
	c.Time(&a.Ended)
	c.Bool(&a.Expired)
}

// progress is an optional Progress: a bool (set), then if set Percent,
// Message, At.
func (c *jobCodec) progress(p **Progress) {
	set := *p != nil
	c.Bool(&set)
	if !set {
		return
	}
	if c.Reading() {
		*p = new(Progress)
	}
	c.Int(&(*p).Percent)
	c.String(&(*p).Message)
	c.Time(&(*p).At)
}

// name is a string that many records share, a queue, type or worker name:
// read through the codec's interner.
func (c *jobCodec) name(p *string) {
	if c.Reading() {
		*p = c.names.String(c.R.Raw())
		return
	}
	c.String(p)
}

// shared is a string that, read back equal to same, is same.
func (c *jobCodec) shared(p *string, same string) {
	if c.Reading() {
		v := c.R.Raw()
		*p = same
		if string(v) != same {
			*p = string(v)
		}
		return
	}
	c.String(p)
}

// status is a Status: its code in statusCodes, or 0 then the string for
// one outside the table.
func (c *jobCodec) status(p *Status) {
	if c.Reading() {
		switch code := c.R.Uvarint(); {
		case code == 0:
			*p = Status(c.R.Str())
		case code < uint64(len(statusCodes)):
			*p = statusCodes[code]
		default:
			c.R.Fail("unknown status code")
			*p = ""
		}
		return
	}
	code := uint64(1)
	for code < uint64(len(statusCodes)) && statusCodes[code] != *p {
		code++
	}
	if code == uint64(len(statusCodes)) {
		code = 0
	}
	c.Uvarint(&code)
	if code == 0 {
		c.String((*string)(p))
	}
}

// decodeJob decodes a job record, binary or (state format 1) JSON, into j.
// Strings are copied out of b. It fails, without allocating more than a
// small multiple of len(b), on bytes that are not a whole record.
func decodeJob(b []byte, j *Job) error {
	if len(b) > 0 && b[0] == '{' {
		return decodeJSON(b, j)
	}
	c, err := openRecord(b)
	if err != nil {
		return err
	}
	c.job(j)
	if err := c.R.End(); err != nil {
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
	c, err := openRecord(b)
	if err != nil {
		return err
	}
	c.names = names
	c.jobHead(h)
	if err := c.R.Err(); err != nil {
		return fmt.Errorf("decode job head: %w", err)
	}
	return nil
}

// openRecord returns a jobReader of the record b, its first byte read.
func openRecord(b []byte) (jobReader, error) {
	if len(b) == 0 {
		return jobReader{}, fmt.Errorf("decode job: empty record")
	}
	if b[0] < jobRecordV1 || b[0] > jobRecordV5 {
		return jobReader{}, fmt.Errorf("decode job: unknown record format %#x (written by a newer Workron?)", b[0])
	}
	c := jobReader{FieldReader: binenc.FieldReader{R: binenc.NewReader(b)}}
	c.version = c.R.Byte()
	return c, nil
}
