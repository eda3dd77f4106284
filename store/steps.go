package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Durable steps (issue #31): a job's journal of recorded steps.
//
// bucketSteps holds every job's journal, flat, so that Digest (which
// hashes each top-level bucket's keys and values in order) covers it and
// snapshots (the bbolt file) carry it. A job's keys share the prefix
// len(job id) as 2 bytes big-endian, then the id; the key that is the
// prefix alone holds the journal's totals (JournalTotals), and each step's
// key is the prefix and the step key (never empty). A job's keys sort
// together, its totals first, its steps by step key.

var bucketSteps = []byte("steps") // stepPrefix(job) -> totals; stepPrefix(job) step key -> Step

// Step statuses.
const (
	StepOK      = "ok"
	StepFailed  = "failed"
	StepWaiting = "waiting" // a wait or invoke the job is parked on (durable.go)
	StepTimeout = "timeout" // a wait whose deadline passed first
)

// Step kinds (durable.go): a run step has none.
const (
	StepSleep  = "sleep"
	StepWait   = "wait"
	StepInvoke = "invoke"
)

// Step is one recorded step of a job's journal.
type Step struct {
	Key        string // name and occurrence: "send", "send#2"
	Status     string // StepOK or StepFailed
	Attempts   int    // tries of the step the recorder reported (at least 1)
	Attempt    int    // the job's attempt that recorded it
	RecordedAt int64  // Unix nanoseconds: the log entry's time
	Duration   int64  // nanoseconds, as the recorder measured it
	Size       int    // bytes of Result
	Result     []byte // nil when read without results
	// A sleep's, wait's or invoke's (durable.go; record version 2): its
	// Kind, a sleep's wake time or a wait's deadline (Unix nanoseconds, 0:
	// none), what a wait waits for (Event and EventKey, or Signal) and an
	// invoke's child.
	Kind     string
	WakeAt   int64
	Event    string
	EventKey string
	Signal   string
	ChildID  string
}

// JournalTotals is what a job's journal holds: its steps and their bytes
// (each step's key and result).
type JournalTotals struct {
	Steps int
	Bytes int64
}

// stepVersion is the first byte of a step record; stepVersion2 a record
// with a kind (a sleep, wait or invoke), whose fields follow the duration.
const (
	stepVersion  = 1
	stepVersion2 = 2
)

// stepPrefix is the prefix of every key of jobID's journal.
func stepPrefix(jobID string) []byte {
	k := make([]byte, 2, 2+len(jobID))
	binary.BigEndian.PutUint16(k, uint16(len(jobID)))
	return append(k, jobID...)
}

func stepKey(jobID, key string) []byte { return append(stepPrefix(jobID), key...) }

// StepBytes is what a step counts against its journal's bytes.
func StepBytes(key string, result []byte) int64 { return int64(len(key) + len(result)) }

// Journal returns the totals of jobID's journal (zero when it has none).
func (t *Tx) Journal(jobID string) JournalTotals {
	v := t.tx.Bucket(bucketSteps).Get(stepPrefix(jobID))
	var tot JournalTotals
	if len(v) == 0 {
		return tot
	}
	n, k := binary.Uvarint(v)
	b, _ := binary.Uvarint(v[max(k, 0):])
	tot.Steps, tot.Bytes = int(n), int64(b)
	return tot
}

// Step returns one recorded step with its result, or ErrNotFound.
func (t *Tx) Step(jobID, key string) (*Step, error) {
	v := t.tx.Bucket(bucketSteps).Get(stepKey(jobID, key))
	if v == nil {
		return nil, ErrNotFound
	}
	return decodeStep(key, v, true)
}

// PutStep records a step the journal does not hold yet, and adds it to
// the journal's totals. The caller checks that it is new and within
// bounds.
func (t *Tx) PutStep(jobID string, s *Step) error {
	if s.Key == "" {
		return errors.New("put step: empty step key")
	}
	b := t.tx.Bucket(bucketSteps)
	if err := b.Put(stepKey(jobID, s.Key), encodeStep(s)); err != nil {
		return fmt.Errorf("put step %s of job %s: %w", s.Key, jobID, err)
	}
	tot := t.Journal(jobID)
	tot.Steps++
	tot.Bytes += StepBytes(s.Key, s.Result)
	return t.putJournal(jobID, tot)
}

// ReplaceStep records the outcome of a step the journal holds (a wait or
// an invoke that was waiting), keeping its totals right. The caller
// checks the bounds.
func (t *Tx) ReplaceStep(jobID string, old, s *Step) error {
	if err := t.tx.Bucket(bucketSteps).Put(stepKey(jobID, s.Key), encodeStep(s)); err != nil {
		return fmt.Errorf("replace step %s of job %s: %w", s.Key, jobID, err)
	}
	tot := t.Journal(jobID)
	tot.Bytes += int64(len(s.Result)) - int64(old.Size)
	return t.putJournal(jobID, tot)
}

func encodeStep(s *Step) []byte {
	ver := byte(stepVersion)
	if s.Kind != "" {
		ver = stepVersion2
	}
	str := func(v []byte, x string) []byte { return append(binary.AppendUvarint(v, uint64(len(x))), x...) }
	v := str([]byte{ver}, s.Status)
	v = binary.AppendUvarint(v, uint64(s.Attempts))
	v = binary.AppendUvarint(v, uint64(s.Attempt))
	v = binary.AppendVarint(v, s.RecordedAt)
	v = binary.AppendVarint(v, s.Duration)
	if ver == stepVersion2 {
		v = str(v, s.Kind)
		v = binary.AppendVarint(v, s.WakeAt)
		v = str(str(str(str(v, s.Event), s.EventKey), s.Signal), s.ChildID)
	}
	return append(v, s.Result...)
}

func (t *Tx) putJournal(jobID string, tot JournalTotals) error {
	b := t.tx.Bucket(bucketSteps)
	tv := binary.AppendUvarint(nil, uint64(tot.Steps))
	tv = binary.AppendUvarint(tv, uint64(tot.Bytes))
	if err := b.Put(stepPrefix(jobID), tv); err != nil {
		return fmt.Errorf("put journal totals of job %s: %w", jobID, err)
	}
	return nil
}

// ForEachStep calls fn for each step of jobID's journal whose key sorts
// after after ("": from the first), in key order, with its result when
// results is set, until fn returns false.
func (t *Tx) ForEachStep(jobID, after string, results bool, fn func(*Step) bool) error {
	prefix := stepPrefix(jobID)
	c := t.tx.Bucket(bucketSteps).Cursor()
	k, v := c.Seek(stepKey(jobID, after))
	if after != "" && k != nil && bytes.Equal(k, stepKey(jobID, after)) {
		k, v = c.Next()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) == len(prefix) {
			continue // the totals
		}
		s, err := decodeStep(string(k[len(prefix):]), v, results)
		if err != nil {
			return fmt.Errorf("job %s: %w", jobID, err)
		}
		if !fn(s) {
			return nil
		}
	}
	return nil
}

// DeleteSteps removes jobID's journal: as many keys as it has steps, and
// its totals.
func (t *Tx) DeleteSteps(jobID string) error {
	prefix := stepPrefix(jobID)
	c := t.tx.Bucket(bucketSteps).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("delete steps of job %s: %w", jobID, err)
		}
	}
	return nil
}

// decodeStep reads a step record; the result is copied only when results
// is set (Size says how long it is either way).
func decodeStep(key string, v []byte, results bool) (*Step, error) {
	bad := fmt.Errorf("step %q: malformed record", key)
	if len(v) == 0 || (v[0] != stepVersion && v[0] != stepVersion2) {
		return nil, bad
	}
	r := v[1:]
	uv := func() uint64 {
		x, n := binary.Uvarint(r)
		if n <= 0 {
			r = nil
			return 0
		}
		r = r[n:]
		return x
	}
	sv := func() int64 {
		x, n := binary.Varint(r)
		if n <= 0 {
			r = nil
			return 0
		}
		r = r[n:]
		return x
	}
	str := func() string {
		n := uv()
		if r == nil || uint64(len(r)) < n {
			r = nil
			return ""
		}
		x := string(r[:n])
		r = r[n:]
		return x
	}
	s := &Step{Key: key, Status: str()}
	if r == nil {
		return nil, bad
	}
	s.Attempts, s.Attempt = int(uv()), int(uv())
	s.RecordedAt, s.Duration = sv(), sv()
	if v[0] == stepVersion2 {
		s.Kind = str()
		s.WakeAt = sv()
		s.Event, s.EventKey, s.Signal, s.ChildID = str(), str(), str(), str()
	}
	if r == nil {
		return nil, bad
	}
	s.Size = len(r)
	if results {
		s.Result = append([]byte{}, r...)
	}
	return s, nil
}

// StepsWithin lists the steps of jobID's journal after after, in key
// order, with their results: at most limit steps, and no more results
// than maxBytes in all, though always at least one step. more says a step
// follows the last listed. One read of the caller's transaction.
func (t *Tx) StepsWithin(jobID, after string, limit int, maxBytes int64) (steps []*Step, more bool, err error) {
	var n int64
	err = t.ForEachStep(jobID, after, true, func(s *Step) bool {
		if len(steps) >= limit || (len(steps) > 0 && n+int64(s.Size) > maxBytes) {
			more = true
			return false
		}
		steps = append(steps, s)
		n += int64(s.Size)
		return true
	})
	return steps, more, err
}
