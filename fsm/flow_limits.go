package fsm

import (
	"fmt"

	"github.com/workron/workron/store"
)

// checkLimits checks a queue's limits as the FSM needs them (the API says
// more, and first).
func checkLimits(l *store.QueueLimits) error {
	switch {
	case l.Concurrency < 0:
		return &ValidationError{Field: "concurrency", Reason: "must not be negative"}
	case l.KeyConcurrency < 0:
		return &ValidationError{Field: "key_concurrency", Reason: "must not be negative"}
	}
	if err := checkRate("rate", "burst", l.Rate, l.Burst); err != nil {
		return err
	}
	if err := checkWeights(l.KeyWeights); err != nil {
		return err
	}
	if err := checkPauseSettings(l); err != nil {
		return err
	}
	return checkRate("key_rate", "key_burst", l.KeyRate, l.KeyBurst)
}

// Bounds of a queue's KeyWeights.
const (
	MaxKeyWeights = 1000
	MaxKeyWeight  = 1000
)

func checkWeights(ws map[string]int) error {
	if len(ws) > MaxKeyWeights {
		return &ValidationError{Field: "key_weights", Reason: fmt.Sprintf("more than %d keys", MaxKeyWeights)}
	}
	for _, k := range sortedKeys(ws) {
		if err := keyLen("key_weights", k, false); err != nil {
			return err
		}
		if w := ws[k]; w < 1 || w > MaxKeyWeight {
			return &ValidationError{Field: "key_weights." + k, Reason: fmt.Sprintf("must be from 1 to %d", MaxKeyWeight)}
		}
	}
	return nil
}

func checkRate(field, burstField string, r store.Rate, burst int) error {
	switch {
	case burst < 0 || burst > MaxBurst:
		return &ValidationError{Field: burstField, Reason: fmt.Sprintf("must be from 0 to %d", MaxBurst)}
	case r.IsZero() && r.Per != 0:
		return &ValidationError{Field: field, Reason: "a period without a count"}
	case r.IsZero():
		return nil
	case r.Count < 0 || r.Count > MaxRateCount:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("count must be from 1 to %d", MaxRateCount)}
	case r.Per <= 0 || r.Per > MaxRatePer:
		return &ValidationError{Field: field, Reason: "period must be from 1ns to 1h"}
	}
	return nil
}

// setQueueLimits replaces a queue's limits, and re-decides which of its
// keys are open under them.
func (a *applier) setQueueLimits(s *SetQueueLimits) Result {
	if s.Name == "" {
		return Result{Err: &ValidationError{Field: "name", Reason: "must not be empty"}}
	}
	if err := checkLimits(&s.Limits); err != nil {
		return Result{Err: err}
	}
	x, q := a.f.idx, s.Name
	fx := x.flow
	old := fx.limits[q]
	if old == nil {
		old = &store.QueueLimits{}
	}
	l := s.Limits
	a.must(a.tx.PutQueueLimits(q, &l, a.index))
	was := fx.queueHeld(q)
	if was {
		x.holdEnds()
	}
	if l.IsZero() {
		delete(fx.limits, q)
	} else {
		fx.limits[q] = &l
	}
	fx.queueMoved(q, was, fx.now)
	if old.Rate != l.Rate || old.Burst != l.Burst {
		a.must(a.tx.DeleteTokenBuckets(q, false))
		delete(fx.qBucket, q)
		if u, ok := fx.qUntil[q]; ok {
			x.clearUntil(waitItem{until: u, queue: q})
		}
	}
	keys := x.queueKeys(q)
	if old.KeyRate != l.KeyRate || old.KeyBurst != l.KeyBurst {
		a.must(a.tx.DeleteTokenBuckets(q, true))
		for _, k := range keys {
			delete(fx.kBucket, k)
			if u, ok := fx.keyUntil[k]; ok {
				x.clearUntil(waitItem{until: u, queue: q, key: k.key, isKey: true})
			}
		}
	}
	for _, k := range keys {
		x.setKey(k, func() {
			if x.keyAtLimit(k) {
				fx.keyFull[k] = true
			} else {
				delete(fx.keyFull, k)
			}
		})
	}
	a.readyChanged = true
	return Result{}
}

// queueKeys lists the keys of a queue that have running attempts, pending
// jobs or a bucket, in order.
func (x *index) queueKeys(q string) []qkey {
	fx := x.flow
	seen := make(map[string]bool)
	add := func(k qkey) {
		if k.queue == q {
			seen[k.key] = true
		}
	}
	for k := range fx.keyRun {
		add(k)
	}
	for k := range fx.types {
		add(k)
	}
	for k := range fx.kBucket {
		add(k)
	}
	for k := range fx.keyUntil {
		add(k)
	}
	out := make([]qkey, 0, len(seen))
	for _, key := range sortedKeys(seen) {
		out = append(out, qkey{q, key})
	}
	return out
}

// rebuildFlow loads the limits and buckets; the jobs' scan that follows
// counts the running attempts and groups the pending jobs.
func (x *index) rebuildFlow(tx *store.Tx, now int64) error {
	fx := x.flow
	fx.now = now
	err := tx.ForEachQueueLimits(func(q string, l *store.QueueLimits) error {
		fx.limits[q] = l
		return nil
	})
	if err != nil {
		return err
	}
	err = tx.ForEachFlowState(func(q string, r store.Rotation) error {
		fx.rot[q] = r
		return nil
	}, func(q string, isKey bool, key string, p store.Pause) error {
		// Kept even when it has run out: the next claim deletes its
		// record, as on a node that applied the log all along.
		x.setPause(q, key, p)
		return nil
	})
	if err != nil {
		return err
	}
	return tx.ForEachTokenBucket(func(q string, isKey bool, key string, b store.TokenBucket) error {
		l := fx.limits[q]
		if l == nil {
			return nil // limits removed; the bucket is unused
		}
		r := l.Rate
		if isKey {
			r = l.KeyRate
			fx.kBucket[qkey{q, key}] = b
		} else {
			fx.qBucket[q] = b
		}
		if r.IsZero() {
			return nil
		}
		if b.Level < r.Per {
			if until := refillAt(b, r); until > now {
				x.closeUntil(q, key, isKey, until)
			}
		}
		return nil
	})
}
