package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Worker is the stored record of a registered worker.
type Worker struct {
	ID            string   `json:"id"`
	ExecAddr      string   `json:"exec,omitempty"`
	VRAMMB        int      `json:"vram,omitempty"`
	MemoryMB      int      `json:"mem,omitempty"`
	CPUMillis     int      `json:"cpu,omitempty"`
	Slots         int      `json:"slots,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	Queues        []string `json:"queues,omitempty"`
	RegisteredAt  int64    `json:"reg"`
	LastHeartbeat int64    `json:"hb"`
	OfflineAt     int64    `json:"offline,omitempty"` // declared offline then; offline while LastHeartbeat is not later
	Owner         string   `json:"owner,omitempty"`   // the token name that registered it; only it may heartbeat or claim as it while it is active
	ModifyIndex   uint64   `json:"mod"`
}

// Node is the stored record of a cluster member's addresses.
type Node struct {
	ID   string `json:"id"`
	HTTP string `json:"http"`
	Raft string `json:"raft"`
}

// Capacity is what the worker offers.
func (w *Worker) Capacity() Resources {
	return Resources{VRAMMB: w.VRAMMB, MemoryMB: w.MemoryMB, CPUMillis: w.CPUMillis, Slots: w.Slots}
}

// Offline reports whether the worker was declared offline and has not been
// heard from since.
func (w *Worker) Offline() bool { return w.OfflineAt != 0 && w.OfflineAt >= w.LastHeartbeat }

// Worker returns the worker with the given id, or ErrNotFound.
func (t *Tx) Worker(id string) (*Worker, error) {
	v := t.tx.Bucket(bucketWorkers).Get([]byte(id))
	if v == nil {
		return nil, ErrNotFound
	}
	w := new(Worker)
	if err := decodeJSON(v, w); err != nil {
		return nil, fmt.Errorf("worker %s: %w", id, err)
	}
	return w, nil
}

// PutWorker stores a worker.
func (t *Tx) PutWorker(w *Worker, index uint64) error {
	w.ModifyIndex = index
	v, err := encodeJSON(w)
	if err != nil {
		return err
	}
	return t.tx.Bucket(bucketWorkers).Put([]byte(w.ID), v)
}

// DeleteWorker removes a worker's record; removing none is no error.
func (t *Tx) DeleteWorker(id string) error {
	return t.tx.Bucket(bucketWorkers).Delete([]byte(id))
}

// ForEachWorker calls fn for each worker in id order.
func (t *Tx) ForEachWorker(fn func(*Worker) error) error {
	return t.tx.Bucket(bucketWorkers).ForEach(func(k, v []byte) error {
		w := new(Worker)
		if err := decodeJSON(v, w); err != nil {
			return fmt.Errorf("worker %s: %w", k, err)
		}
		return fn(w)
	})
}

// WorkersAfter returns up to limit workers whose ids sort after after
// ("" from the first), in id order, and whether more follow them.
func (t *Tx) WorkersAfter(after string, limit int) ([]*Worker, bool, error) {
	return pageAfter[Worker](t.tx.Bucket(bucketWorkers), "worker", after, limit)
}

// pageAfter reads up to limit JSON records of bucket b whose keys sort
// after after ("" from the first), in key order, and whether more follow:
// one page of a list that pages by key. what names a record in errors.
func pageAfter[T any](b *bolt.Bucket, what, after string, limit int) ([]*T, bool, error) {
	var out []*T
	c := b.Cursor()
	k, v := c.Seek([]byte(after))
	if k != nil && after != "" && string(k) == after {
		k, v = c.Next()
	}
	for ; k != nil; k, v = c.Next() {
		if len(out) == limit {
			return out, true, nil
		}
		rec := new(T)
		if err := decodeJSON(v, rec); err != nil {
			return nil, false, fmt.Errorf("%s %s: %w", what, k, err)
		}
		out = append(out, rec)
	}
	return out, false, nil
}

// PutNode stores a cluster member's addresses.
func (t *Tx) PutNode(n *Node) error {
	v, err := encodeJSON(n)
	if err != nil {
		return err
	}
	return t.tx.Bucket(bucketNodes).Put([]byte(n.ID), v)
}

// DeleteNode forgets a cluster member.
func (t *Tx) DeleteNode(id string) error {
	return t.tx.Bucket(bucketNodes).Delete([]byte(id))
}

// Nodes returns every known member, in id order.
func (t *Tx) Nodes() ([]*Node, error) {
	var out []*Node
	err := t.tx.Bucket(bucketNodes).ForEach(func(k, v []byte) error {
		n := new(Node)
		if err := decodeJSON(v, n); err != nil {
			return fmt.Errorf("node %s: %w", k, err)
		}
		out = append(out, n)
		return nil
	})
	return out, err
}
