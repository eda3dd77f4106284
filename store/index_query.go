package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrBadTerm means a ListQuery term names no field the index knows, or a
// metadata term has no key: nothing was read.
var ErrBadTerm = errors.New("store: bad index term")

// The fields of an IndexTerm.
const (
	FieldQueue          = "queue"
	FieldType           = "type"
	FieldConcurrencyKey = "concurrency_key"
	FieldSchedule       = "schedule"
	FieldMetadata       = "metadata"
)

// IndexTerm says a job's Field equals Value; for FieldMetadata, that its
// metadata holds Key with Value. A term on queue or metadata, and one on
// type, concurrency key or schedule with a Value, reads the search index
// (index.go); a type, concurrency key or schedule term with an empty Value
// (jobs without one, which the index leaves out) is checked on each job
// the other terms give, as Match is.
type IndexTerm struct {
	Field string
	Key   string // FieldMetadata only
	Value string
}

// ListQuery selects jobs, newest first: those in Status (any if empty)
// that every term of Terms and Match hold, with After < Seq < Before.
type ListQuery struct {
	Status Status      // "" for any
	Terms  []IndexTerm // all must hold
	Before uint64      // only jobs with Seq < Before; 0 for no bound
	// After keeps only jobs with Seq > After; 0 for no bound. Seqs follow
	// creation time (SeqAtTime), so a range of CreatedAt is a range of Seq.
	After uint64
	// CreatedFrom and CreatedTo keep only jobs with CreatedFrom <=
	// CreatedAt < CreatedTo (0: no bound), read as a range of seqs
	// (SeqAtTime).
	CreatedFrom, CreatedTo int64
	Limit                  int             // at most this many
	Match                  func(*Job) bool // nil matches all
	Scan                   int             // give up after examining this many (0 = no cap)
	// ScanBytes gives up after examining this many bytes of job records
	// (0 = no cap), so that the budget holds however large the records.
	ScanBytes int
}

// JoinStepsPerScan is how many index entries a list may step over for each
// job its Scan budget lets it examine: walking keys costs about a
// hundredth of decoding a record.
const JoinStepsPerScan = 100

// plan is how a query reads: the cursors whose seqs intersect to the
// candidates, and the terms to check on each candidate's record.
type plan struct {
	cursors  []seqWalker
	residual []IndexTerm // terms the index does not answer
}

// plan turns q's status and terms into cursors: status and a queue term
// together into the status×queue index, the status alone into the status
// bucket, each other indexed term into its own; no cursor at all into the
// seq bucket (every job). Without the index (Store.noIndex) every term is
// checked on the records.
func (t *Tx) plan(q *ListQuery) (plan, error) {
	var p plan
	if err := t.flushIndex(); err != nil {
		return p, err
	}
	if err := t.createdRange(q); err != nil {
		return p, err
	}
	idx := t.tx.Bucket(bucketIndex)
	statusDone := q.Status == ""
	for _, term := range q.Terms {
		if err := checkTerm(term); err != nil {
			return p, err
		}
		if t.noIndex {
			p.residual = append(p.residual, term)
			continue
		}
		ec := &epochCursor{c: idx.Cursor()}
		switch term.Field {
		case FieldQueue:
			if !statusDone {
				ec.kind, ec.term = idxStatusQueue, appendParts(nil, string(q.Status), term.Value)
				statusDone = true
			} else {
				p.cursors = append(p.cursors, newQueueCursor(idx.Cursor(), term.Value))
				continue
			}
		case FieldType, FieldConcurrencyKey, FieldSchedule:
			if term.Value == "" {
				p.residual = append(p.residual, term)
				continue
			}
			ec.kind, ec.term = termKind[term.Field], appendParts(nil, term.Value)
		case FieldMetadata:
			ec.kind, ec.term = idxMetadata, appendParts(nil, term.Key, term.Value)
		}
		p.cursors = append(p.cursors, ec)
	}
	if !statusDone {
		p.cursors = append(p.cursors, newSeqCursor(t.tx.Bucket(bucketStatus), append([]byte(q.Status), 0)))
	}
	if len(p.cursors) == 0 {
		p.cursors = append(p.cursors, newSeqCursor(t.tx.Bucket(bucketSeq), nil))
	}
	return p, nil
}

// checkTerm refuses a term of no known field, or of metadata without a key.
func checkTerm(term IndexTerm) error {
	switch term.Field {
	case FieldQueue, FieldType, FieldConcurrencyKey, FieldSchedule:
		return nil
	case FieldMetadata:
		if term.Key == "" {
			return fmt.Errorf("%w: a metadata term without a key", ErrBadTerm)
		}
		return nil
	}
	return fmt.Errorf("%w: field %.40q", ErrBadTerm, term.Field)
}

var termKind = map[string]byte{FieldType: idxType, FieldConcurrencyKey: idxConcurrencyKey, FieldSchedule: idxSchedule}

// termHolds reports whether j satisfies term.
func termHolds(j *Job, term IndexTerm) bool {
	switch term.Field {
	case FieldQueue:
		return j.Queue == term.Value
	case FieldType:
		return j.Type == term.Value
	case FieldConcurrencyKey:
		return j.ConcurrencyKey == term.Value
	case FieldSchedule:
		return j.Schedule == term.Value
	case FieldMetadata:
		v, ok := j.Metadata[term.Key]
		return ok && v == term.Value
	}
	return false
}

// holds reports whether j satisfies every condition of q, indexed or not:
// a candidate is checked whole, so that a hash shared by two long values
// (index.go) never lists a job that does not match.
func (q *ListQuery) holds(j *Job) bool {
	if q.Status != "" && j.Status != q.Status {
		return false
	}
	for _, term := range q.Terms {
		if !termHolds(j, term) {
			return false
		}
	}
	return q.Match == nil || q.Match(j)
}

// errStop ends a join early; not an error.
var errStop = errors.New("stop")

// join walks down from seq from to after (exclusive) the seqs every cursor
// holds (a leapfrog intersection: each cursor in turn moves to at most the
// current candidate, and a candidate all of them land on is a match), and
// calls fn with each. Its cost follows the rarest term, with no estimate
// of which one that is. It stops when fn returns errStop, or after steps
// cursor moves (0: no cap) once it has got below from; it returns the lowest seq it has decided (every
// seq from it up has been passed to fn or ruled out) and whether it
// reached the end.
func join(cs []seqWalker, from, after uint64, steps int, fn func(seq uint64) error) (low uint64, end bool, err error) {
	cur, taken := from, 0
	for cur > after {
		for agree, i := 0, 0; agree < len(cs); i = (i + 1) % len(cs) {
			// Out of steps, stop, once past from: a cursor must move.
			if taken++; steps > 0 && taken > steps && cur < from {
				return cur + 1, false, nil
			}
			s, ok := cs[i].seekLE(cur)
			if !ok || s <= after {
				return after + 1, true, nil
			}
			if s == cur {
				agree++
			} else {
				cur, agree = s, 1
			}
		}
		if err := fn(cur); err != nil {
			if errors.Is(err, errStop) {
				return cur, false, nil
			}
			return cur, false, err
		}
		cur--
	}
	return after + 1, true, nil
}

// firstSeq is where a walk from before starts (0: nothing below it).
func firstSeq(before uint64) uint64 {
	if before == 0 {
		return math.MaxUint64
	}
	return before - 1
}

// ListJobs returns up to q.Limit matching jobs, newest first, and the Seq to
// pass as Before for the next page (0 when there are no more). It reads
// the candidates the index gives for q.Status and q.Terms (see plan and
// join) and checks each whole, with q.Match. A page that runs out of its
// scan budget (q.Scan records examined, q.ScanBytes of them, or
// JoinStepsPerScan*q.Scan index entries) ends early, even empty, with the
// cursor of where it stopped. A bad term is ErrBadTerm.
func (t *Tx) ListJobs(q ListQuery) ([]*Job, uint64, error) {
	p, err := t.plan(&q)
	if err != nil {
		return nil, 0, err
	}
	var (
		out                   []*Job
		next                  uint64
		scanned, scannedBytes int
	)
	seqs, jobs := t.tx.Bucket(bucketSeq), t.tx.Bucket(bucketJobs)
	low, end, err := join(p.cursors, firstSeq(q.Before), q.After, JoinStepsPerScan*q.Scan, func(seq uint64) error {
		if q.Limit > 0 && len(out) == q.Limit {
			next = out[len(out)-1].Seq
			return errStop
		}
		scanned++
		if (q.Scan > 0 && scanned > q.Scan) || (q.ScanBytes > 0 && scannedBytes >= q.ScanBytes) {
			if next = seq + 1; len(out) > 0 {
				next = out[len(out)-1].Seq
			}
			return errStop
		}
		t.key = binary.BigEndian.AppendUint64(t.key[:0], seq)
		id := seqs.Get(t.key)
		v := jobs.Get(id)
		if id == nil || v == nil {
			return fmt.Errorf("job of seq %d (%s): %w", seq, id, ErrNotFound)
		}
		scannedBytes += len(v)
		j := new(Job)
		if err := decodeJob(v, j); err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
		if q.holds(j) {
			out = append(out, j)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, 0, err
	case next != 0:
		return out, next, nil
	case !end:
		return out, low, nil // the join's step budget ran out
	}
	return out, 0, nil
}

// CountJobs counts the jobs q selects (q.Limit, q.Scan and q.ScanBytes
// aside), examining at most budget index entries and records (0: no cap).
// When q has no Match and every term is indexed it counts from the index
// alone (CountByStatus), exactly, whatever the budget.
// exact says the count is complete; if not, n counts the jobs from
// q.Before down to next (exclusive of nothing below it), and next is the
// Before to count on from. A bad term is ErrBadTerm.
func (t *Tx) CountJobs(q ListQuery, budget int) (n int, exact bool, next uint64, err error) {
	return t.countJobs(q, budget)
}

func (t *Tx) countJobs(q ListQuery, budget int) (n int, exact bool, next uint64, err error) {
	// Every condition indexed: the lists' lengths, whatever the budget.
	switch c, err := t.CountByStatus(q, nil); {
	case err == nil:
		for _, k := range c.ByStatus {
			n += k
		}
		return n, true, 0, nil
	case !errors.Is(err, ErrNotIndexed):
		return 0, false, 0, err
	}
	p, err := t.plan(&q)
	if err != nil {
		return 0, false, 0, err
	}
	decode := q.Match != nil || len(p.residual) > 0
	taken := 0
	seqs, jobs := t.tx.Bucket(bucketSeq), t.tx.Bucket(bucketJobs)
	var stoppedAt uint64
	low, end, err := join(p.cursors, firstSeq(q.Before), q.After, budget, func(seq uint64) error {
		if !decode {
			n++
			return nil
		}
		if taken++; budget > 0 && taken > budget {
			stoppedAt = seq + 1
			return errStop
		}
		t.key = binary.BigEndian.AppendUint64(t.key[:0], seq)
		id := seqs.Get(t.key)
		v := jobs.Get(id)
		if id == nil || v == nil {
			return fmt.Errorf("job of seq %d (%s): %w", seq, id, ErrNotFound)
		}
		j := new(Job)
		if err := decodeJob(v, j); err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
		if q.holds(j) {
			n++
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, false, 0, err
	case stoppedAt != 0:
		return n, false, stoppedAt, nil
	case !end:
		return n, false, low, nil
	}
	return n, true, 0, nil
}

// createdRange narrows q.After and q.Before to q's creation times.
func (t *Tx) createdRange(q *ListQuery) error {
	if q.CreatedFrom != 0 {
		s, err := t.SeqAtTime(q.CreatedFrom)
		if err != nil {
			return err
		}
		q.After = max(q.After, s-1)
	}
	if q.CreatedTo != 0 {
		s, err := t.SeqAtTime(q.CreatedTo)
		if err != nil {
			return err
		}
		if q.Before == 0 || s < q.Before {
			q.Before = max(s, 1) // Before 1 keeps nothing: no job has seq 0
		}
	}
	return nil
}

// SeqAtTime is the least seq of the jobs created at or after at (Unix
// nanoseconds), or one past the newest job's if none: a job was created
// before at exactly when its Seq is below it, because seqs are handed out
// in apply order and the FSM's command time never goes back (fsm: now is
// the greater of the entry's time and the last one applied). It reads
// about log2 of the seq range records.
func (t *Tx) SeqAtTime(at int64) (uint64, error) {
	c := t.tx.Bucket(bucketSeq).Cursor()
	lk, _ := c.Last()
	if lk == nil {
		return 1, nil
	}
	lo, hi := uint64(1), getUint(lk)+1 // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		k, id := c.Seek(putUint(mid)) // the first job at or after mid
		if k == nil || getUint(k) >= hi {
			hi = mid
			continue
		}
		j, err := t.Job(string(id))
		if err != nil {
			return 0, fmt.Errorf("seq at time: %w", err)
		}
		if j.CreatedAt >= at {
			hi = mid
		} else {
			lo = getUint(k) + 1
		}
	}
	return lo, nil
}
