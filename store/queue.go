package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A queue's flow-control limits and the token buckets of its rate limits.
// Both buckets are new in state format 3 and absent means empty (no limits,
// every bucket full), so a file without them needs no upgrade.
var (
	bucketQueueLimits = []byte("queue_limits") // queue name -> QueueLimits
	bucketTokens      = []byte("tokens")       // queue 0x00 ['q' | 'k' key] -> TokenBucket
)

// Rate is Count tokens every Per nanoseconds; the zero Rate is no limit.
type Rate struct {
	Count int64 `json:"n"`
	Per   int64 `json:"per"`
}

// IsZero reports whether r sets no limit.
func (r Rate) IsZero() bool { return r.Count == 0 }

// QueueLimits are a queue's flow-control limits and settings; a zero field
// sets none (or keeps the default).
// Concurrency bounds the queue's running attempts, KeyConcurrency those of
// each concurrency key; Rate and KeyRate are token buckets of Burst and
// KeyBurst tokens.
type QueueLimits struct {
	Concurrency    int  `json:"conc,omitempty"`
	KeyConcurrency int  `json:"key_conc,omitempty"`
	Rate           Rate `json:"rate,omitzero"`
	Burst          int  `json:"burst,omitempty"`
	KeyRate        Rate `json:"key_rate,omitzero"`
	KeyBurst       int  `json:"key_burst,omitempty"`
	// KeyWeights gives some concurrency keys more turns in the queue's
	// rotation over its keys (default 1 each); see fsm's fair.go.
	KeyWeights map[string]int `json:"key_w,omitempty"`
	// Set by protocol 4 (fsm.ProtocolPauses): PauseQueue lets a
	// rate-limited attempt of a job without a concurrency key pause the
	// whole queue (else only that job waits); MaxPause (nanoseconds; 0:
	// fsm.DefaultMaxPause) caps each pause a rate-limited attempt asks for.
	// See fsm's pause.go.
	PauseQueue bool  `json:"pause_q,omitempty"`
	MaxPause   int64 `json:"max_pause,omitempty"`

	ModifyIndex uint64 `json:"mod"`
}

// IsZero reports whether l sets no limit.
func (l *QueueLimits) IsZero() bool {
	return l.Concurrency == 0 && l.KeyConcurrency == 0 && l.Rate.IsZero() && l.KeyRate.IsZero() && len(l.KeyWeights) == 0 &&
		!l.PauseQueue && l.MaxPause == 0
}

// TokenBucket is a rate limit's state: Level tokens, in units of 1/Per of
// a token (so that refills are exact integers), as of time At (Unix ns).
type TokenBucket struct {
	Level int64
	At    int64
}

// QueueLimits returns a queue's limits, or ErrNotFound when it has none.
func (t *Tx) QueueLimits(queue string) (*QueueLimits, error) {
	v := t.tx.Bucket(bucketQueueLimits).Get([]byte(queue))
	if v == nil {
		return nil, ErrNotFound
	}
	l := new(QueueLimits)
	if err := decodeJSON(v, l); err != nil {
		return nil, fmt.Errorf("queue limits %s: %w", queue, err)
	}
	return l, nil
}

// PutQueueLimits stores a queue's limits; zero limits delete the record.
func (t *Tx) PutQueueLimits(queue string, l *QueueLimits, index uint64) error {
	b := t.tx.Bucket(bucketQueueLimits)
	if l.IsZero() {
		if err := b.Delete([]byte(queue)); err != nil {
			return fmt.Errorf("delete queue limits %s: %w", queue, err)
		}
		return nil
	}
	l.ModifyIndex = index
	v, err := encodeJSON(l)
	if err != nil {
		return err
	}
	if err := b.Put([]byte(queue), v); err != nil {
		return fmt.Errorf("put queue limits %s: %w", queue, err)
	}
	return nil
}

// ForEachQueueLimits calls fn for each queue with limits, in name order.
func (t *Tx) ForEachQueueLimits(fn func(queue string, l *QueueLimits) error) error {
	return t.tx.Bucket(bucketQueueLimits).ForEach(func(k, v []byte) error {
		l := new(QueueLimits)
		if err := decodeJSON(v, l); err != nil {
			return fmt.Errorf("queue limits %s: %w", k, err)
		}
		return fn(string(k), l)
	})
}

// tokenKey is a bucket's key: the queue's own when isKey is false, else
// the concurrency key's. A queue name holds no 0x00, so the first one ends it.
func tokenKey(queue string, isKey bool, key string) []byte {
	b := append([]byte(queue), 0)
	if !isKey {
		return append(b, 'q')
	}
	return append(append(b, 'k'), key...)
}

// PutTokenBucket stores the bucket of a queue (isKey false) or of one of
// its concurrency keys.
func (t *Tx) PutTokenBucket(queue string, isKey bool, key string, tb TokenBucket) error {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(tb.Level))
	binary.BigEndian.PutUint64(v[8:], uint64(tb.At))
	if err := t.tx.Bucket(bucketTokens).Put(tokenKey(queue, isKey, key), v); err != nil {
		return fmt.Errorf("put token bucket of %s: %w", queue, err)
	}
	return nil
}

// DeleteTokenBuckets removes a queue's bucket (keys false) or all of its
// keys' buckets (keys true): they start again full.
func (t *Tx) DeleteTokenBuckets(queue string, keys bool) error {
	b := t.tx.Bucket(bucketTokens)
	if !keys {
		return b.Delete(tokenKey(queue, false, ""))
	}
	prefix := tokenKey(queue, true, "")
	var del [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		del = append(del, bytes.Clone(k))
	}
	for _, k := range del { // not while the cursor walks the bucket
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("delete token bucket of %s: %w", queue, err)
		}
	}
	return nil
}

// ForEachTokenBucket calls fn for each stored bucket in key order: its
// queue, whether it is a concurrency key's, the key, and its state.
func (t *Tx) ForEachTokenBucket(fn func(queue string, isKey bool, key string, tb TokenBucket) error) error {
	return t.tx.Bucket(bucketTokens).ForEach(func(k, v []byte) error {
		queue, isKey, key, tb, err := parseTokenBucket(k, v)
		if err != nil {
			return err
		}
		return fn(queue, isKey, key, tb)
	})
}

// parseTokenBucket reads a stored bucket's key and value.
func parseTokenBucket(k, v []byte) (queue string, isKey bool, key string, tb TokenBucket, err error) {
	i := bytes.IndexByte(k, 0)
	if i < 0 || i+1 >= len(k) || len(v) != 16 {
		return "", false, "", tb, fmt.Errorf("token bucket %q: malformed", k)
	}
	tb = TokenBucket{Level: int64(binary.BigEndian.Uint64(v)), At: int64(binary.BigEndian.Uint64(v[8:]))}
	return string(k[:i]), k[i+1] == 'k', string(k[i+2:]), tb, nil
}

// PruneTokenBuckets visits, in key order, at most limit stored buckets
// that follow the one whose key is after (from the first when after is
// empty), and deletes those drop says to. It returns how many it deleted
// and the key of the last one it visited, nil when it visited fewer than
// limit: no bucket follows them.
func (t *Tx) PruneTokenBuckets(after []byte, limit int, drop func(queue string, isKey bool, key string, tb TokenBucket) bool) (int, []byte, error) {
	b := t.tx.Bucket(bucketTokens)
	c := b.Cursor()
	k, v := c.First()
	if len(after) > 0 {
		k, v = c.Seek(after)
		if k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	var del [][]byte
	var last []byte
	n := 0
	for ; k != nil && n < limit; k, v = c.Next() {
		queue, isKey, key, tb, err := parseTokenBucket(k, v)
		if err != nil {
			return 0, nil, err
		}
		n++
		last = k
		if drop(queue, isKey, key, tb) {
			del = append(del, bytes.Clone(k))
		}
	}
	if n < limit {
		last = nil
	} else {
		last = bytes.Clone(last)
	}
	for _, k := range del { // not while the cursor walks the bucket
		if err := b.Delete(k); err != nil {
			return 0, nil, fmt.Errorf("delete token bucket %q: %w", k, err)
		}
	}
	return len(del), last, nil
}
