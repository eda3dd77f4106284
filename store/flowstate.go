package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The replicated state of fairness and of pauses asked for by the work
// (issue #17): each queue's place in its rotation over concurrency keys,
// and the queues and keys a rate-limited attempt paused. The bucket is new
// in this release and absent means empty (every rotation at its start, no
// pause), so a file without it needs no upgrade.
var bucketFlow = []byte("flow") // queue 0x00 'r' -> Rotation; queue 0x00 'p' ['q' | 'k' key] -> Pause

// Rotation is where a queue's claims are in their turn over its
// concurrency keys: Key ("" for the jobs without a key) has had Used
// claims of its current turn.
type Rotation struct {
	Key  string
	Used int64
}

// Pause holds a queue's or key's claims until Until (Unix ns); Reason is
// what the attempt that asked for it said.
type Pause struct {
	Until  int64
	Reason string
}

func rotationKey(queue string) []byte { return append(append([]byte(queue), 0), 'r') }

func pauseKey(queue string, isKey bool, key string) []byte {
	b := append(append([]byte(queue), 0), 'p')
	if !isKey {
		return append(b, 'q')
	}
	return append(append(b, 'k'), key...)
}

// PutRotation stores a queue's place in its rotation.
func (t *Tx) PutRotation(queue string, r Rotation) error {
	v := binary.BigEndian.AppendUint64(nil, uint64(r.Used))
	v = append(v, r.Key...)
	if err := t.tx.Bucket(bucketFlow).Put(rotationKey(queue), v); err != nil {
		return fmt.Errorf("put rotation of %s: %w", queue, err)
	}
	return nil
}

// PutPause stores the pause of a queue (isKey false) or of one of its
// concurrency keys, replacing any it had.
func (t *Tx) PutPause(queue string, isKey bool, key string, p Pause) error {
	v := binary.BigEndian.AppendUint64(nil, uint64(p.Until))
	v = append(v, p.Reason...)
	if err := t.tx.Bucket(bucketFlow).Put(pauseKey(queue, isKey, key), v); err != nil {
		return fmt.Errorf("put pause of %s: %w", queue, err)
	}
	return nil
}

// DeletePause removes a pause that has run out or was lifted.
func (t *Tx) DeletePause(queue string, isKey bool, key string) error {
	if err := t.tx.Bucket(bucketFlow).Delete(pauseKey(queue, isKey, key)); err != nil {
		return fmt.Errorf("delete pause of %s: %w", queue, err)
	}
	return nil
}

// ForEachFlowState calls rot for each stored rotation and pause for each
// stored pause, in key order.
func (t *Tx) ForEachFlowState(rot func(queue string, r Rotation) error, pause func(queue string, isKey bool, key string, p Pause) error) error {
	return t.tx.Bucket(bucketFlow).ForEach(func(k, v []byte) error {
		i := bytes.IndexByte(k, 0)
		if i < 0 || i+1 >= len(k) || len(v) < 8 {
			return fmt.Errorf("flow state %q: malformed", k)
		}
		q, n := string(k[:i]), int64(binary.BigEndian.Uint64(v))
		switch {
		case k[i+1] == 'r' && i+2 == len(k):
			return rot(q, Rotation{Key: string(v[8:]), Used: n})
		case k[i+1] == 'p' && i+2 < len(k) && (k[i+2] == 'q' || k[i+2] == 'k'):
			return pause(q, k[i+2] == 'k', string(k[i+3:]), Pause{Until: n, Reason: string(v[8:])})
		}
		return fmt.Errorf("flow state %q: malformed", k)
	})
}
