package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Sleeps, events and child jobs (issue #31, fsm/durable.go): three flat
// buckets, so that Digest covers them and snapshots (the bbolt file) carry
// them.
//
// bucketEvents keeps the events (and signals) sent within the look-back
// window: the key {0} holds the totals (EventTotals); 'c' channel seq(8)
// an event (its time, then its payload), so that a channel's events sort
// oldest first; 's' seq(8) the same event's time and channel, so that
// events leave in the order they came.
//
// bucketWaits holds the jobs waiting on a channel: 'n' channel the count,
// 'w' channel job id a waiting job (the value is its step key).
//
// bucketParks holds what each parked job waits for: 'p' job id a Park;
// 'k' kind how many jobs are parked on that kind of step;
// 'c' child id the parent waiting on a child (parent id 0x00 step key);
// 'e' len(job id) job id channel the last event seq the job consumed of
// the channel.
var (
	bucketEvents = []byte("events")
	bucketWaits  = []byte("waits")
	bucketParks  = []byte("parks")
)

// Channel is what events are sent on and waited for: an event's name and
// key, or a signal's name and the job it goes to (Key is the job's id).
type Channel struct {
	Signal bool   `json:"sig,omitempty"`
	Name   string `json:"name"`
	Key    string `json:"key"`
}

// bytes is the channel as a key prefix: no channel's is a prefix of
// another's.
func (c Channel) bytes() []byte {
	k := []byte{'e'}
	if c.Signal {
		k[0] = 's'
	}
	k = binary.BigEndian.AppendUint16(k, uint16(len(c.Name)))
	k = append(k, c.Name...)
	k = binary.BigEndian.AppendUint16(k, uint16(len(c.Key)))
	return append(k, c.Key...)
}

func decodeChannel(b []byte) (Channel, bool) {
	if len(b) < 5 || (b[0] != 'e' && b[0] != 's') {
		return Channel{}, false
	}
	c := Channel{Signal: b[0] == 's'}
	n := int(binary.BigEndian.Uint16(b[1:]))
	if len(b) < 3+n+2 {
		return Channel{}, false
	}
	c.Name = string(b[3 : 3+n])
	b = b[3+n:]
	m := int(binary.BigEndian.Uint16(b))
	if len(b) != 2+m {
		return Channel{}, false
	}
	c.Key = string(b[2:])
	return c, true
}

// Event is one kept event: its number (from 1, in the order sent), its
// channel, the log entry's time it was sent at (Unix nanoseconds) and its
// payload.
type Event struct {
	Seq     uint64
	Chan    Channel
	At      int64
	Payload []byte
}

// EventTotals is what bucketEvents holds: the events kept and their
// payloads' and channels' bytes, and the last event number given.
type EventTotals struct {
	Count   int
	Bytes   int64
	LastSeq uint64
}

var keyEventTotals = []byte{0}

// EventBytes is what an event counts against the bytes kept.
func EventBytes(c Channel, payload []byte) int64 {
	return int64(len(c.Name) + len(c.Key) + len(payload))
}

// EventTotals returns the totals of the kept events.
func (t *Tx) EventTotals() EventTotals {
	v := t.tx.Bucket(bucketEvents).Get(keyEventTotals)
	var tot EventTotals
	if len(v) == 0 {
		return tot
	}
	n, k := binary.Uvarint(v)
	v = v[max(k, 0):]
	b, k := binary.Uvarint(v)
	v = v[max(k, 0):]
	s, _ := binary.Uvarint(v)
	tot.Count, tot.Bytes, tot.LastSeq = int(n), int64(b), s
	return tot
}

func (t *Tx) putEventTotals(tot EventTotals) error {
	v := binary.AppendUvarint(nil, uint64(tot.Count))
	v = binary.AppendUvarint(v, uint64(tot.Bytes))
	v = binary.AppendUvarint(v, tot.LastSeq)
	if err := t.tx.Bucket(bucketEvents).Put(keyEventTotals, v); err != nil {
		return fmt.Errorf("put event totals: %w", err)
	}
	return nil
}

// PutEvent keeps a new event, numbering it after the last: e.Seq is set.
func (t *Tx) PutEvent(e *Event) error {
	tot := t.EventTotals()
	e.Seq = tot.LastSeq + 1
	b := t.tx.Bucket(bucketEvents)
	ch := e.Chan.bytes()
	v := binary.AppendVarint(nil, e.At)
	if err := b.Put(binary.BigEndian.AppendUint64(append([]byte{'c'}, ch...), e.Seq), append(v, e.Payload...)); err != nil {
		return fmt.Errorf("put event %d: %w", e.Seq, err)
	}
	if err := b.Put(binary.BigEndian.AppendUint64([]byte{'s'}, e.Seq), append(v, ch...)); err != nil {
		return fmt.Errorf("put event %d: %w", e.Seq, err)
	}
	tot.Count++
	tot.Bytes += EventBytes(e.Chan, e.Payload)
	tot.LastSeq = e.Seq
	return t.putEventTotals(tot)
}

// FirstEvent returns the oldest kept event of channel c numbered after
// after and sent after since, or ErrNotFound. It reads O(log n) records
// whatever the channel holds: events that left the window but are not yet
// deleted are passed over by number (firstSince), not one by one.
func (t *Tx) FirstEvent(c Channel, after uint64, since int64) (*Event, error) {
	if first := t.firstSince(since); first > after+1 {
		after = first - 1
	}
	prefix := append([]byte{'c'}, c.bytes()...)
	cur := t.tx.Bucket(bucketEvents).Cursor()
	for k, v := cur.Seek(binary.BigEndian.AppendUint64(bytes.Clone(prefix), after+1)); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
		if len(k) != len(prefix)+8 {
			return nil, fmt.Errorf("event key %q: malformed", k)
		}
		at, n := binary.Varint(v)
		if n <= 0 {
			return nil, fmt.Errorf("event key %q: malformed record", k)
		}
		if at <= since {
			continue // expired, not yet deleted
		}
		return &Event{Seq: binary.BigEndian.Uint64(k[len(prefix):]), Chan: c, At: at, Payload: bytes.Clone(v[n:])}, nil
	}
	return nil, ErrNotFound
}

// firstSince is the number of the oldest kept event sent after since
// (LastSeq+1 if none). Kept events are numbers firstKept..LastSeq without
// a gap (ExpireEvents deletes from the oldest), and their times never go
// down with their numbers, so a binary search by number finds it.
func (t *Tx) firstSince(since int64) uint64 {
	b := t.tx.Bucket(bucketEvents)
	last := t.EventTotals().LastSeq
	k, _ := b.Cursor().Seek([]byte{'s'})
	if k == nil || k[0] != 's' || len(k) != 9 {
		return last + 1
	}
	lo, hi := binary.BigEndian.Uint64(k[1:]), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		v := b.Get(binary.BigEndian.AppendUint64([]byte{'s'}, mid))
		at, n := binary.Varint(v)
		if v == nil || n <= 0 || at > since {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// ExpireEvents deletes the oldest kept events sent before before, at most
// limit of them, and returns how many it deleted.
func (t *Tx) ExpireEvents(before int64, limit int) (int, error) {
	b := t.tx.Bucket(bucketEvents)
	tot := t.EventTotals()
	n := 0
	for n < limit {
		// Seek again after each delete: a cursor does not survive them.
		k, v := b.Cursor().Seek([]byte{'s'})
		if k == nil || k[0] != 's' {
			break
		}
		k, v = bytes.Clone(k), bytes.Clone(v)
		at, m := binary.Varint(v)
		if m <= 0 || len(k) != 9 {
			return n, fmt.Errorf("event index %q: malformed", k)
		}
		if at >= before {
			break
		}
		c, ok := decodeChannel(v[m:])
		if !ok {
			return n, fmt.Errorf("event index %q: malformed channel", k)
		}
		ck := binary.BigEndian.AppendUint64(append([]byte{'c'}, c.bytes()...), binary.BigEndian.Uint64(k[1:]))
		tot.Bytes -= EventBytes(c, nil) + int64(len(b.Get(ck))-varintLen(at))
		if err := b.Delete(ck); err != nil {
			return n, fmt.Errorf("expire event: %w", err)
		}
		if err := b.Delete(k); err != nil {
			return n, fmt.Errorf("expire event: %w", err)
		}
		tot.Count--
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, t.putEventTotals(tot)
}

func varintLen(x int64) int { return len(binary.AppendVarint(nil, x)) }

// Waiters returns how many jobs wait on channel c.
func (t *Tx) Waiters(c Channel) int {
	v := t.tx.Bucket(bucketWaits).Get(append([]byte{'n'}, c.bytes()...))
	n, _ := binary.Uvarint(v)
	return int(n)
}

func (t *Tx) setWaiters(c Channel, n int) error {
	b := t.tx.Bucket(bucketWaits)
	k := append([]byte{'n'}, c.bytes()...)
	if n == 0 {
		return b.Delete(k)
	}
	return b.Put(k, binary.AppendUvarint(nil, uint64(n)))
}

func waiterKey(c Channel, jobID string) []byte {
	return append(append([]byte{'w'}, c.bytes()...), jobID...)
}

// PutWaiter registers job jobID as waiting on channel c with its step
// step; registering it again changes nothing.
func (t *Tx) PutWaiter(c Channel, jobID, step string) error {
	b := t.tx.Bucket(bucketWaits)
	k := waiterKey(c, jobID)
	if b.Get(k) != nil {
		return nil
	}
	if err := b.Put(k, []byte(step)); err != nil {
		return fmt.Errorf("register wait of job %s: %w", jobID, err)
	}
	return t.setWaiters(c, t.Waiters(c)+1)
}

// DeleteWaiter unregisters job jobID's wait on channel c, if registered.
func (t *Tx) DeleteWaiter(c Channel, jobID string) error {
	b := t.tx.Bucket(bucketWaits)
	k := waiterKey(c, jobID)
	if b.Get(k) == nil {
		return nil
	}
	if err := b.Delete(k); err != nil {
		return fmt.Errorf("unregister wait of job %s: %w", jobID, err)
	}
	return t.setWaiters(c, t.Waiters(c)-1)
}

// Waiter is a job waiting on a channel, with its step key.
type Waiter struct {
	JobID string
	Step  string
}

// WaitersOf lists up to limit jobs waiting on channel c, by job id.
func (t *Tx) WaitersOf(c Channel, limit int) []Waiter {
	prefix := append([]byte{'w'}, c.bytes()...)
	var out []Waiter
	cur := t.tx.Bucket(bucketWaits).Cursor()
	for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = cur.Next() {
		out = append(out, Waiter{JobID: string(k[len(prefix):]), Step: string(v)})
	}
	return out
}

// Park is what a parked job waits for: a sleep's wake time, a wait's
// channel and deadline (WakeAt 0: none), an invoke's child.
type Park struct {
	Kind    string   `json:"kind"`
	Step    string   `json:"step"`
	WakeAt  int64    `json:"wake_at,omitempty"`
	Chan    *Channel `json:"chan,omitempty"`
	ChildID string   `json:"child,omitempty"`
}

func parkKey(jobID string) []byte { return append([]byte{'p'}, jobID...) }

// Park returns what job jobID is parked on, or ErrNotFound.
func (t *Tx) Park(jobID string) (*Park, error) {
	v := t.tx.Bucket(bucketParks).Get(parkKey(jobID))
	if v == nil {
		return nil, ErrNotFound
	}
	var p Park
	if err := json.Unmarshal(v, &p); err != nil {
		return nil, fmt.Errorf("park of job %s: %w", jobID, err)
	}
	return &p, nil
}

// PutPark records what job jobID is parked on, and keeps the totals by
// kind (parks_count.go).
func (t *Tx) PutPark(jobID string, p *Park) error {
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("park of job %s: %w", jobID, err)
	}
	if err := t.DeletePark(jobID); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketParks).Put(parkKey(jobID), v); err != nil {
		return fmt.Errorf("park job %s: %w", jobID, err)
	}
	if err := t.addParked(p.Kind, 1); err != nil {
		return fmt.Errorf("park job %s: %w", jobID, err)
	}
	return nil
}

// DeletePark forgets what job jobID was parked on (not its wait's
// registration), and keeps the totals by kind; a job not parked is no
// error.
func (t *Tx) DeletePark(jobID string) error {
	kind, found, err := t.parkedKind(jobID)
	if err != nil || !found {
		return err
	}
	if err := t.tx.Bucket(bucketParks).Delete(parkKey(jobID)); err != nil {
		return fmt.Errorf("unpark job %s: %w", jobID, err)
	}
	if err := t.addParked(kind, -1); err != nil {
		return fmt.Errorf("unpark job %s: %w", jobID, err)
	}
	return nil
}

func childKey(childID string) []byte { return append([]byte{'c'}, childID...) }

// PutChild records that job parentID's step step waits on child childID.
func (t *Tx) PutChild(childID, parentID, step string) error {
	if err := t.tx.Bucket(bucketParks).Put(childKey(childID), []byte(parentID+"\x00"+step)); err != nil {
		return fmt.Errorf("put child %s of job %s: %w", childID, parentID, err)
	}
	return nil
}

// ChildOf returns the parent and step that wait on child childID, ok
// false when none does.
func (t *Tx) ChildOf(childID string) (parentID, step string, ok bool) {
	v := t.tx.Bucket(bucketParks).Get(childKey(childID))
	if v == nil {
		return "", "", false
	}
	p, s, found := bytes.Cut(v, []byte{0})
	return string(p), string(s), found
}

// DeleteChild forgets the parent waiting on child childID.
func (t *Tx) DeleteChild(childID string) error {
	if err := t.tx.Bucket(bucketParks).Delete(childKey(childID)); err != nil {
		return fmt.Errorf("delete child %s: %w", childID, err)
	}
	return nil
}

func consumedPrefix(jobID string) []byte {
	return append([]byte{'e'}, stepPrefix(jobID)...)
}

// Consumed returns the number of the last event of channel c that job
// jobID consumed (0: none).
func (t *Tx) Consumed(jobID string, c Channel) uint64 {
	v := t.tx.Bucket(bucketParks).Get(append(consumedPrefix(jobID), c.bytes()...))
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// SetConsumed records that job jobID consumed event seq of channel c.
func (t *Tx) SetConsumed(jobID string, c Channel, seq uint64) error {
	if err := t.tx.Bucket(bucketParks).Put(append(consumedPrefix(jobID), c.bytes()...), putUint(seq)); err != nil {
		return fmt.Errorf("job %s consumed event %d: %w", jobID, seq, err)
	}
	return nil
}

// DeleteDurable removes what a deleted job leaves of sleeps, waits and
// child jobs: its park and the wait registered with it, the link to the
// parent that invoked it, and its consumed events.
func (t *Tx) DeleteDurable(jobID string) error {
	p, err := t.Park(jobID)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		if p.Chan != nil {
			if err := t.DeleteWaiter(*p.Chan, jobID); err != nil {
				return err
			}
		}
		if err := t.DeletePark(jobID); err != nil {
			return err
		}
	}
	if err := t.DeleteChild(jobID); err != nil {
		return err
	}
	prefix := consumedPrefix(jobID)
	c := t.tx.Bucket(bucketParks).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("delete consumed events of job %s: %w", jobID, err)
		}
	}
	return nil
}

// checkEvents decodes every kept event and checks the totals (Verify).
func (t *Tx) checkEvents() error {
	b := t.tx.Bucket(bucketEvents)
	var count int
	var sum int64
	err := b.ForEach(func(k, v []byte) error {
		switch {
		case bytes.Equal(k, keyEventTotals):
			return nil
		case k[0] == 's':
			at, m := binary.Varint(v)
			c, ok := decodeChannel(v[max(m, 0):])
			if m <= 0 || len(k) != 9 || !ok {
				return fmt.Errorf("event index %q: malformed", k)
			}
			ev := b.Get(binary.BigEndian.AppendUint64(append([]byte{'c'}, c.bytes()...), binary.BigEndian.Uint64(k[1:])))
			if ev == nil {
				return fmt.Errorf("event index %q: no event", k)
			}
			if at2, n := binary.Varint(ev); n <= 0 || at2 != at {
				return fmt.Errorf("event index %q: malformed event", k)
			}
			count++
			sum += EventBytes(c, nil) + int64(len(ev)-varintLen(at))
		case k[0] != 'c':
			return fmt.Errorf("events key %q: unknown", k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if tot := t.EventTotals(); tot.Count != count || tot.Bytes != sum {
		return fmt.Errorf("event totals %+v, the events hold %d of %d bytes", tot, count, sum)
	}
	return nil
}

// checkParks decodes every park record, and recounts them by kind
// against the totals (Verify).
func (t *Tx) checkParks() error {
	counted := map[string]int{}
	err := t.tx.Bucket(bucketParks).ForEach(func(k, v []byte) error {
		if k[0] != 'p' {
			return nil
		}
		var p Park
		if err := json.Unmarshal(v, &p); err != nil || p.Step == "" {
			return fmt.Errorf("park %q: malformed", k)
		}
		counted[p.Kind]++
		return nil
	})
	if err != nil {
		return err
	}
	return t.checkParkTotals(counted)
}
