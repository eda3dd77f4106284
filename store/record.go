package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
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
//
// and nothing after. A time (a field named At, Deadline, Started or Ended;
// Unix nanoseconds) is 8 bytes little-endian; other unsigned integers are
// uvarints, signed ones varints (binary.AppendUvarint, AppendVarint); a string, or Payload, is its length
// as a uvarint then its bytes (length 0 reads back as nil Payload); a list is
// a uvarint count then its items; a map is a count then key, value pairs in
// key order, so one Job always gives the same bytes; a bool is one byte 0 or
// 1; ExitCode is a bool (set) then, if set, a varint; Jitter is its IEEE 754
// bits, 8 bytes little-endian; a Status is a uvarint code (statusCodes), 0
// followed by the string for one outside the table. Each Attempt of History
// is Attempt, WorkerID, Lease, Status, ExitCode, Error, Started, Ended,
// Expired.
//
// Changing this layout needs a new first byte (jobRecordV2), with V1 still
// read.

// maxInterned bounds an interner.
const maxInterned = 1024

// interner hands out one string per distinct value, so that a scan of many
// records (rebuilding the indexes) allocates each queue, type and worker name
// once, and the indexes hold one copy of it. A nil interner allocates every
// time.
type interner map[string]string

func (in interner) string(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	if in != nil && len(in) < maxInterned {
		in[s] = s
	}
	return s
}

// jobRecordV1 is the first byte of a binary job record.
const jobRecordV1 = 0x01

// statusCodes numbers the statuses in binary records; append only.
var statusCodes = [...]Status{1: StatusBlocked, StatusPending, StatusReserved, StatusRunning, StatusCancelling, StatusDone, StatusFailed, StatusCancelled}

// Minimum encoded sizes of list items, so that a count read from a record
// can be checked against the bytes left before anything is allocated.
const (
	minStringLen  = 1 // its length
	minMapPairLen = 2 // two lengths
	minAttemptLen = 9 // nine fields of at least one byte
)

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
	if math.IsNaN(j.Backoff.Jitter) || math.IsInf(j.Backoff.Jitter, 0) {
		return nil, fmt.Errorf("encode job %s: backoff jitter %v is not a number", j.ID, j.Backoff.Jitter)
	}
	b = append(b, jobRecordV1)
	h := j.Head()
	b = appendJobHead(b, &h)
	return appendJobBody(b, j), nil
}

func appendJobHead(b []byte, h *JobHead) []byte {
	b = appendString(b, h.ID)
	b = binary.AppendUvarint(b, h.Seq)
	b = appendStatus(b, h.Status)
	b = appendString(b, h.Queue)
	b = appendString(b, h.Type)
	b = binary.AppendVarint(b, int64(h.Priority))
	b = appendTime(b, h.RunAt)
	b = appendString(b, h.WorkerID)
	b = binary.AppendUvarint(b, h.Lease)
	b = appendTime(b, h.LeaseDeadline)
	b = binary.AppendVarint(b, int64(h.Resources.VRAMMB))
	b = binary.AppendVarint(b, int64(h.Resources.MemoryMB))
	b = binary.AppendVarint(b, int64(h.Resources.CPUMillis))
	b = binary.AppendVarint(b, int64(h.Resources.Slots))
	return appendStrings(b, h.Tags)
}

func appendJobBody(b []byte, j *Job) []byte {
	b = appendString(b, j.Command)
	b = appendBytes(b, j.Payload)
	b = appendMap(b, j.Env)
	b = appendMap(b, j.Metadata)
	b = appendStrings(b, j.DependsOn)
	b = binary.AppendVarint(b, int64(j.Waiting))
	b = appendStrings(b, j.Dependents)
	b = binary.AppendVarint(b, int64(j.MaxAttempts))
	b = binary.AppendVarint(b, int64(j.Attempts))
	b = appendString(b, j.IdempotencyKey)
	b = binary.AppendVarint(b, j.Timeout)
	b = binary.AppendVarint(b, j.Backoff.Base)
	b = binary.AppendVarint(b, j.Backoff.Max)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(j.Backoff.Jitter+0)) // +0: -0 is 0, as in JSON
	b = appendTime(b, j.CreatedAt)
	b = appendTime(b, j.StartedAt)
	b = appendTime(b, j.DoneAt)
	b = appendIntPtr(b, j.ExitCode)
	b = appendString(b, j.Output)
	b = appendString(b, j.LastError)
	b = binary.AppendUvarint(b, uint64(len(j.History)))
	for i := range j.History {
		b = appendAttempt(b, &j.History[i])
	}
	b = binary.AppendVarint(b, j.Retention)
	b = binary.AppendVarint(b, j.UniqueFor)
	b = appendTime(b, j.ExpireAt)
	b = appendString(b, j.Schedule)
	b = appendTime(b, j.ScheduledFor)
	b = appendString(b, j.After)
	b = appendString(b, j.GangID)
	b = binary.AppendVarint(b, int64(j.GangIndex))
	b = binary.AppendVarint(b, int64(j.GangSize))
	b = binary.AppendUvarint(b, j.PreemptEpoch)
	return binary.AppendUvarint(b, j.ModifyIndex)
}

func appendAttempt(b []byte, a *Attempt) []byte {
	b = binary.AppendVarint(b, int64(a.Attempt))
	b = appendString(b, a.WorkerID)
	b = binary.AppendUvarint(b, a.Lease)
	b = appendStatus(b, a.Status)
	b = appendIntPtr(b, a.ExitCode)
	b = appendString(b, a.Error)
	b = appendTime(b, a.Started)
	b = appendTime(b, a.Ended)
	return appendBool(b, a.Expired)
}

func appendTime(b []byte, t int64) []byte {
	return binary.LittleEndian.AppendUint64(b, uint64(t))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendMap(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	if len(m) == 0 {
		return b
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendIntPtr(b []byte, p *int) []byte {
	if p == nil {
		return appendBool(b, false)
	}
	return binary.AppendVarint(appendBool(b, true), int64(*p))
}

func appendStatus(b []byte, s Status) []byte {
	for code := 1; code < len(statusCodes); code++ {
		if statusCodes[code] == s {
			return binary.AppendUvarint(b, uint64(code))
		}
	}
	return appendString(binary.AppendUvarint(b, 0), string(s))
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
	if r.err == nil && r.off != len(r.b) {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return fmt.Errorf("decode job: %w", r.err)
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
	if r.err != nil {
		return fmt.Errorf("decode job head: %w", r.err)
	}
	return nil
}

func jobReader(b []byte) (reader, error) {
	if len(b) == 0 {
		return reader{}, fmt.Errorf("decode job: empty record")
	}
	if b[0] != jobRecordV1 {
		return reader{}, fmt.Errorf("decode job: unknown record format %#x (written by a newer Workron?)", b[0])
	}
	return reader{b: b, off: 1}, nil
}

// reader reads a binary record from off on. Its first error sticks: later
// reads return zero values, and err says what was wrong where. (It moves an
// offset rather than reslicing b: no pointer is written as it reads.)
type reader struct {
	b     []byte
	off   int
	err   error
	names interner // see name
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d of %d", what, r.off, len(r.b))
	}
	r.off = len(r.b)
}

// left is the number of bytes not read yet.
func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) jobHead(h *JobHead) {
	h.ID = r.string()
	h.Seq = r.uvarint()
	h.Status = r.status()
	h.Queue = r.name()
	h.Type = r.name()
	h.Priority = r.int()
	h.RunAt = r.time()
	h.WorkerID = r.name()
	h.Lease = r.uvarint()
	h.LeaseDeadline = r.time()
	h.Resources.VRAMMB = r.int()
	h.Resources.MemoryMB = r.int()
	h.Resources.CPUMillis = r.int()
	h.Resources.Slots = r.int()
	h.Tags = r.strings()
}

func (r *reader) jobBody(j *Job) {
	j.Command = r.string()
	j.Payload = r.bytes()
	j.Env = r.stringMap()
	j.Metadata = r.stringMap()
	j.DependsOn = r.strings()
	j.Waiting = r.int()
	j.Dependents = r.strings()
	j.MaxAttempts = r.int()
	j.Attempts = r.int()
	j.IdempotencyKey = r.string()
	j.Timeout = r.varint()
	j.Backoff.Base = r.varint()
	j.Backoff.Max = r.varint()
	j.Backoff.Jitter = r.float()
	j.CreatedAt = r.time()
	j.StartedAt = r.time()
	j.DoneAt = r.time()
	j.ExitCode = r.intPtr()
	j.Output = r.string()
	j.LastError = r.string()
	j.History = r.history(j.WorkerID, j.LastError)
	j.Retention = r.varint()
	j.UniqueFor = r.varint()
	j.ExpireAt = r.time()
	j.Schedule = r.string()
	j.ScheduledFor = r.time()
	j.After = r.string()
	j.GangID = r.string()
	j.GangIndex = r.int()
	j.GangSize = r.int()
	j.PreemptEpoch = r.uvarint()
	j.ModifyIndex = r.uvarint()
}

// history reads the attempts; those whose worker or error is the job's
// (often the last one's) share its string.
func (r *reader) history(worker, lastError string) []Attempt {
	n := r.count(minAttemptLen)
	if n == 0 {
		return nil
	}
	out := make([]Attempt, n)
	for i := range out {
		a := &out[i]
		a.Attempt = r.int()
		a.WorkerID = r.stringOr(worker)
		a.Lease = r.uvarint()
		a.Status = r.status()
		a.ExitCode = r.intPtr()
		a.Error = r.stringOr(lastError)
		a.Started = r.time()
		a.Ended = r.time()
		a.Expired = r.bool()
	}
	return out
}

func (r *reader) uvarint() uint64 {
	if r.off < len(r.b) && r.b[r.off] < 0x80 { // the common one-byte case
		r.off++
		return uint64(r.b[r.off-1])
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint() int64 {
	u := r.uvarint() // zigzag, as binary.Varint
	return int64(u>>1) ^ -int64(u&1)
}

func (r *reader) int() int {
	v := r.varint()
	if int64(int(v)) != v {
		r.fail("integer out of range")
		return 0
	}
	return int(v)
}

// count reads a list's length and checks that the bytes left can hold that
// many items of at least min bytes each.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if n > uint64(r.left()/min) {
		r.fail("count past the end")
		return 0
	}
	return int(n)
}

// raw reads a length-prefixed run of bytes, still inside the record.
func (r *reader) raw() []byte {
	n := r.uvarint()
	if n > uint64(r.left()) {
		r.fail("length past the end")
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v
}

func (r *reader) string() string { return string(r.raw()) }

// name reads a string that many records share, a queue, type or worker
// name, through the reader's interner.
func (r *reader) name() string { return r.names.string(r.raw()) }

// stringOr reads a string, returning same if it is equal.
func (r *reader) stringOr(same string) string {
	v := r.raw()
	if string(v) == same {
		return same
	}
	return string(v)
}

// bytes reads a copy of a length-prefixed run of bytes; nil when empty.
func (r *reader) bytes() []byte {
	v := r.raw()
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}

func (r *reader) strings() []string {
	n := r.count(minStringLen)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.string()
	}
	return out
}

func (r *reader) stringMap() map[string]string {
	n := r.count(minMapPairLen)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.string()
		m[k] = r.string()
	}
	return m
}

func (r *reader) bool() bool {
	if r.off == len(r.b) || r.b[r.off] > 1 {
		r.fail("bad bool")
		return false
	}
	r.off++
	return r.b[r.off-1] == 1
}

func (r *reader) intPtr() *int {
	if !r.bool() {
		return nil
	}
	v := r.int()
	if r.err != nil {
		return nil
	}
	return &v
}

func (r *reader) time() int64 {
	if r.left() < 8 {
		r.fail("short time")
		return 0
	}
	r.off += 8
	return int64(binary.LittleEndian.Uint64(r.b[r.off-8:]))
}

func (r *reader) float() float64 {
	if r.left() < 8 {
		r.fail("short float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.fail("float is not a number")
		return 0
	}
	r.off += 8
	return v
}

func (r *reader) status() Status {
	code := r.uvarint()
	switch {
	case code == 0:
		return Status(r.string())
	case code < uint64(len(statusCodes)):
		return statusCodes[code]
	}
	r.fail("unknown status code")
	return ""
}
