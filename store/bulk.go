package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Bulk actions (issue #30). A bulk action (cancel, retry, delete or a new
// priority for every job a selector matches) is applied in chunks across
// log entries; its record here holds where the walk is and what it did,
// so that a new leader resumes it exactly. The bucket is new in this
// release and absent means empty, so a file without it needs no upgrade.
//
//	'b' id(8) -> the Bulk, JSON
//	'n'       -> the last id given (8)
var bucketBulk = []byte("bulk")

// BulkState is where a bulk action is in its life.
type BulkState string

// The states: running until its walk ends (done) or it is stopped.
const (
	BulkRunning BulkState = "running"
	BulkDone    BulkState = "done"
	BulkStopped BulkState = "stopped"
)

// Bulk is one bulk action.
type Bulk struct {
	ID uint64 `json:"id"`
	// Action is cancel, retry, delete or priority; Priority is the new
	// priority of a priority action.
	Action   string `json:"action"`
	Priority int    `json:"priority,omitempty"`
	// Selector is the text that chose the jobs, as the API took it; Status
	// is the status index the walk reads ("" for every job), which the
	// apply checks each job against again.
	Selector string `json:"selector"`
	Status   Status `json:"status,omitempty"`
	// Cursor is where the walk is: it goes on with the jobs of Seq below
	// it, newest first. It starts above every job that existed when the
	// action was created, so jobs submitted later are never reached.
	Cursor uint64 `json:"cursor"`
	// Matched counts the jobs the walk chose; each is then Done (the
	// action applied), Skipped (it no longer qualified when its chunk
	// applied: gone, another status, or the action's rule refused its
	// state) or Failed (the rule refused it otherwise).
	Matched int64 `json:"matched"`
	Done    int64 `json:"done"`
	Failed  int64 `json:"failed"`
	Skipped int64 `json:"skipped"`
	// LastError is the last refusal counted in Failed.
	LastError string    `json:"last_error,omitempty"`
	State     BulkState `json:"state"`
	// Created and Updated are entry times (Unix nanoseconds).
	Created int64 `json:"created"`
	Updated int64 `json:"updated"`
}

func bulkKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'b'}, id) }

// bulk is the bucket, which a file opened read-only by an older release's
// tools may lack: nil then.
func (t *Tx) bulk() *bolt.Bucket { return t.tx.Bucket(bucketBulk) }

// NewBulk gives b the next bulk id and stores it.
func (t *Tx) NewBulk(b *Bulk) error {
	bk := t.bulk()
	id := getUint(bk.Get([]byte{'n'})) + 1
	if err := bk.Put([]byte{'n'}, putUint(id)); err != nil {
		return fmt.Errorf("number bulk action: %w", err)
	}
	b.ID = id
	return t.PutBulk(b)
}

// PutBulk stores b's record.
func (t *Tx) PutBulk(b *Bulk) error {
	v, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode bulk action %d: %w", b.ID, err)
	}
	if err := t.bulk().Put(bulkKey(b.ID), v); err != nil {
		return fmt.Errorf("put bulk action %d: %w", b.ID, err)
	}
	return nil
}

// DeleteBulk removes the record of a bulk action.
func (t *Tx) DeleteBulk(id uint64) error {
	if err := t.bulk().Delete(bulkKey(id)); err != nil {
		return fmt.Errorf("delete bulk action %d: %w", id, err)
	}
	return nil
}

// GetBulk returns the bulk action of the id, or ErrNotFound.
func (t *Tx) GetBulk(id uint64) (*Bulk, error) {
	bk := t.bulk()
	if bk == nil {
		return nil, ErrNotFound
	}
	v := bk.Get(bulkKey(id))
	if v == nil {
		return nil, ErrNotFound
	}
	return decodeBulk(v)
}

func decodeBulk(v []byte) (*Bulk, error) {
	b := new(Bulk)
	if err := json.Unmarshal(v, b); err != nil {
		return nil, fmt.Errorf("decode bulk action: %w", err)
	}
	return b, nil
}

// Bulks lists every bulk action kept, oldest first (the FSM keeps at most
// a few hundred).
func (t *Tx) Bulks() ([]*Bulk, error) {
	bk := t.bulk()
	if bk == nil {
		return nil, nil
	}
	var out []*Bulk
	c := bk.Cursor()
	for k, v := c.Seek([]byte{'b'}); k != nil && k[0] == 'b'; k, v = c.Next() {
		b, err := decodeBulk(v)
		if err != nil {
			return nil, fmt.Errorf("bulk action %d: %w", getUint(k[1:]), err)
		}
		out = append(out, b)
	}
	return out, nil
}

// LastSeq is the highest job seq given so far (0: none).
func (t *Tx) LastSeq() uint64 { return t.metaUint(keyNextSeq) }
