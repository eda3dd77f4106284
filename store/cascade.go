package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Cascades under way (issue #28). A cascade that ends (or revives) the
// dependents of a job, transitively, is applied in bounded chunks across
// log entries: what the entry that started it did not reach is recorded
// here, and later entries continue it. The bucket is new in this release
// and absent means empty (no cascade under way), so a file without it
// needs no upgrade. Per cascade:
//
//	'c' id(8)         -> the Cascade, as encodeCascade writes it
//	'q' id(8) pos(8)  -> the id of a job whose dependents are still to be
//	                     visited, pos in [Head, Tail): a queue, in order
//	'n'               -> the last id given (8)
var bucketCascades = []byte("cascades")

// CascadeKind says what a cascade does to the dependents it reaches.
type CascadeKind byte

// The cascades: ending the blocked dependents of a cancelled or failed
// job, and reviving those a retried job's cascade had ended.
const (
	CascadeCancel CascadeKind = 1
	CascadeFail   CascadeKind = 2
	CascadeRevive CascadeKind = 3
)

// Cascade is one cascade under way.
type Cascade struct {
	ID   uint64
	Kind CascadeKind
	// Root is the job it started from, RootStatus that job's status then
	// (the error of each dependent it ends names it), Now the time of the
	// entry that started it: each job it changes is changed as of then.
	Root       string
	RootStatus Status
	Now        int64
	// Head and Tail bound the queue of jobs whose dependents are still to
	// be visited; After is the seq of the last dependent of the job at
	// Head already visited (0: none yet).
	Head, Tail uint64
	After      uint64
	// Changed counts the jobs it changed so far.
	Changed int64
}

const cascadeFixed = 1 + 8*5 // Kind, Now, Head, Tail, After, Changed

func cascadeKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'c'}, id) }

func cascadeQueueKey(id, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'q'}, id), pos)
}

func encodeCascade(c *Cascade) []byte {
	b := make([]byte, 0, cascadeFixed+2+len(c.RootStatus)+len(c.Root))
	b = append(b, byte(c.Kind))
	for _, v := range []uint64{uint64(c.Now), c.Head, c.Tail, c.After, uint64(c.Changed)} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = append(b, byte(len(c.RootStatus)))
	b = append(b, c.RootStatus...)
	return append(b, c.Root...)
}

func decodeCascade(id uint64, v []byte) (*Cascade, error) {
	if len(v) < cascadeFixed+1 || len(v) < cascadeFixed+1+int(v[cascadeFixed]) {
		return nil, fmt.Errorf("cascade %d: record of %d bytes", id, len(v))
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(v[1+8*i:]) }
	n := int(v[cascadeFixed])
	return &Cascade{
		ID: id, Kind: CascadeKind(v[0]),
		Now: int64(u(0)), Head: u(1), Tail: u(2), After: u(3), Changed: int64(u(4)),
		RootStatus: Status(v[cascadeFixed+1 : cascadeFixed+1+n]),
		Root:       string(v[cascadeFixed+1+n:]),
	}, nil
}

// cascades is the bucket, which a file opened read-only by an older
// release's tools may lack: nil then.
func (t *Tx) cascades() *bolt.Bucket { return t.tx.Bucket(bucketCascades) }

// NewCascade gives c the next cascade id and stores it with an empty queue.
func (t *Tx) NewCascade(c *Cascade) error {
	b := t.cascades()
	id := getUint(b.Get([]byte{'n'})) + 1
	if err := b.Put([]byte{'n'}, putUint(id)); err != nil {
		return fmt.Errorf("number cascade: %w", err)
	}
	c.ID, c.Head, c.Tail, c.After = id, 0, 0, 0
	return t.PutCascade(c)
}

// PutCascade stores c's record (not its queue, which PushCascade and
// PopCascade keep).
func (t *Tx) PutCascade(c *Cascade) error {
	if err := t.cascades().Put(cascadeKey(c.ID), encodeCascade(c)); err != nil {
		return fmt.Errorf("put cascade %d: %w", c.ID, err)
	}
	return nil
}

// GetCascade returns the cascade of the id, or ErrNotFound once it is done.
func (t *Tx) GetCascade(id uint64) (*Cascade, error) {
	b := t.cascades()
	if b == nil {
		return nil, ErrNotFound
	}
	v := b.Get(cascadeKey(id))
	if v == nil {
		return nil, ErrNotFound
	}
	return decodeCascade(id, v)
}

// Cascades lists up to limit cascades under way, oldest first.
func (t *Tx) Cascades(limit int) ([]*Cascade, error) {
	b := t.cascades()
	if b == nil {
		return nil, nil
	}
	var out []*Cascade
	c := b.Cursor()
	for k, v := c.Seek([]byte{'c'}); k != nil && k[0] == 'c' && len(out) < limit; k, v = c.Next() {
		cs, err := decodeCascade(getUint(k[1:]), v)
		if err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

// DeleteCascade removes a cascade that is done, with what its queue holds.
func (t *Tx) DeleteCascade(c *Cascade) error {
	b := t.cascades()
	for pos := c.Head; pos < c.Tail; pos++ {
		if err := b.Delete(cascadeQueueKey(c.ID, pos)); err != nil {
			return fmt.Errorf("delete cascade %d: %w", c.ID, err)
		}
	}
	if err := b.Delete(cascadeKey(c.ID)); err != nil {
		return fmt.Errorf("delete cascade %d: %w", c.ID, err)
	}
	return nil
}

// PushCascade appends a job to c's queue; the caller stores c after.
func (t *Tx) PushCascade(c *Cascade, jobID string) error {
	if err := t.cascades().Put(cascadeQueueKey(c.ID, c.Tail), []byte(jobID)); err != nil {
		return fmt.Errorf("queue job %s in cascade %d: %w", jobID, c.ID, err)
	}
	c.Tail++
	return nil
}

// CascadeHead is the job at the head of c's queue; false when it is empty.
func (t *Tx) CascadeHead(c *Cascade) (string, bool) {
	if c.Head >= c.Tail {
		return "", false
	}
	return string(t.cascades().Get(cascadeQueueKey(c.ID, c.Head))), true
}

// PopCascade drops the head of c's queue; the caller stores c after.
func (t *Tx) PopCascade(c *Cascade) error {
	if c.Head >= c.Tail {
		return nil
	}
	if err := t.cascades().Delete(cascadeQueueKey(c.ID, c.Head)); err != nil {
		return fmt.Errorf("pop cascade %d: %w", c.ID, err)
	}
	c.Head++
	c.After = 0
	return nil
}

// checkCascades verifies the cascade bucket: each queue entry belongs to
// a cascade under way, within its [Head, Tail), and each of those is there.
func (t *Tx) checkCascades() error {
	b := t.cascades()
	if b == nil {
		return nil
	}
	queued := make(map[uint64]uint64)
	heads := make(map[uint64]*Cascade)
	err := b.ForEach(func(k, v []byte) error {
		switch {
		case bytes.Equal(k, []byte{'n'}):
		case len(k) == 9 && k[0] == 'c':
			c, err := decodeCascade(getUint(k[1:]), v)
			if err != nil {
				return err
			}
			heads[c.ID] = c
		case len(k) == 17 && k[0] == 'q':
			queued[getUint(k[1:9])]++
		default:
			return fmt.Errorf("cascade key %x", k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id, n := range queued {
		c, ok := heads[id]
		if !ok {
			return fmt.Errorf("cascade %d: queue without its record", id)
		}
		if n != c.Tail-c.Head {
			return fmt.Errorf("cascade %d: %d queued, record says %d", id, n, c.Tail-c.Head)
		}
	}
	for id, c := range heads {
		if queued[id] != c.Tail-c.Head {
			return fmt.Errorf("cascade %d: %d queued, record says %d", id, queued[id], c.Tail-c.Head)
		}
	}
	return nil
}
