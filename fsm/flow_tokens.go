package fsm

import (
	"github.com/workron/workron/store"
)

// refill is b at now: Count units a nanosecond, up to burst tokens. An
// absent bucket (At 0) is full.
func refill(b store.TokenBucket, r store.Rate, burst int, now int64) store.TokenBucket {
	capacity := int64(burst) * r.Per
	switch {
	case b.At == 0:
		return store.TokenBucket{Level: capacity, At: now}
	case now > b.At:
		room := capacity - b.Level
		if e := now - b.At; room <= 0 || e > room/r.Count {
			b.Level = capacity
		} else {
			b.Level += e * r.Count
		}
		b.At = now
	}
	b.Level = min(b.Level, capacity)
	return b
}

// refillAt is when b, short of a token, has one again.
func refillAt(b store.TokenBucket, r store.Rate) int64 {
	short := r.Per - b.Level
	return after(b.At, (short+r.Count-1)/r.Count)
}

// burstOf is a rate's burst: as set, else its Count (one period's worth).
func burstOf(r store.Rate, burst int) int {
	if burst > 0 {
		return burst
	}
	return int(r.Count)
}

// takeTokens takes a token from the buckets of the job's queue and key,
// if both have one at now; else it closes the empty one and takes none.
func (a *applier) takeTokens(it readyItem) bool {
	fx := a.f.idx.flow
	q := a.f.idx.queueOf(it)
	l := fx.limits[q]
	if l == nil || (l.Rate.IsZero() && (l.KeyRate.IsZero() || it.key == 0)) {
		return true
	}
	key := a.f.idx.keyOf(it)
	var qb, kb store.TokenBucket
	useQ, useK := !l.Rate.IsZero(), !l.KeyRate.IsZero() && key != ""
	k := qkey{q, key}
	if useQ {
		qb = refill(fx.qBucket[q], l.Rate, burstOf(l.Rate, l.Burst), a.now)
		if qb.Level < l.Rate.Per {
			a.f.idx.closeUntil(q, "", false, refillAt(qb, l.Rate))
			return false
		}
	}
	if useK {
		kb = refill(fx.kBucket[k], l.KeyRate, burstOf(l.KeyRate, l.KeyBurst), a.now)
		if kb.Level < l.KeyRate.Per {
			a.f.idx.closeUntil(q, key, true, refillAt(kb, l.KeyRate))
			return false
		}
	}
	if useQ {
		qb.Level -= l.Rate.Per
		fx.qBucket[q] = qb
		a.must(a.tx.PutTokenBucket(q, false, "", qb))
		if qb.Level < l.Rate.Per {
			a.f.idx.closeUntil(q, "", false, refillAt(qb, l.Rate))
		}
	}
	if useK {
		kb.Level -= l.KeyRate.Per
		fx.kBucket[k] = kb
		a.must(a.tx.PutTokenBucket(q, true, key, kb))
		if kb.Level < l.KeyRate.Per {
			a.f.idx.closeUntil(q, key, true, refillAt(kb, l.KeyRate))
		}
	}
	return true
}
