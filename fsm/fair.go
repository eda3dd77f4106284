package fsm

import (
	"github.com/google/btree"

	"github.com/workron/workron/store"
)

// Fairness within a queue (issue #17). A Fair claim takes a queue's jobs
// in turns over its concurrency keys rather than by priority alone, so
// that a key with a million pending jobs does not starve one with ten:
//
//   - the participants of a queue's rotation are its open keys with a due
//     job (byKey holds their heads, by key), in key order, and its jobs
//     without a key, as one more participant of weight 1 before every key;
//   - a participant's turn is up to its weight (KeyWeights, default 1) of
//     claims in a row; then the next participant in order that has a job
//     the claiming worker can take gets its turn, wrapping around;
//   - within a participant, the job is its best by readyLess (priority,
//     then run time, then submission): priorities still order the jobs of
//     one key.
//
// So a participant with a job that claims of its queue can take gets one
// within K claims of that queue, K the sum of the weights of the
// participants with jobs meanwhile (each other one takes at most its
// weight before the rotation reaches it). The rotation (store.Rotation)
// is stored and so kept by snapshots; it moves only on a claim that takes
// a job, so a claim whose pick a bucket refuses changes nothing.
//
// A queue whose claimable jobs have no key is picked as before, and its
// rotation is left alone; a claim without Fair (from a cluster still being
// upgraded to ProtocolFair) picks by priority across keys.

// weight is a key's weight in its queue's rotation ("" for the jobs
// without a key, always 1).
func (fx *flowIndex) weight(q, key string) int64 {
	if l := fx.limits[q]; l != nil && key != "" {
		if w := l.KeyWeights[key]; w > 0 {
			return int64(w)
		}
	}
	return 1
}

// hasKeys reports whether a queue's kinds ks have an open key's jobs.
func (x *index) hasKeys(ks []kind) bool {
	for _, k := range ks {
		if x.flow.byKey[k] != nil {
			return true
		}
	}
	return false
}

// fairPick is the next job of one queue's kinds ks in its rotation, of
// those fit takes (nil: any).
func (x *index) fairPick(ks []kind, fit func(*need) bool) (readyItem, bool) {
	fx := x.flow
	q := ks[0].queue
	rot := fx.rot[q]
	start := rot.Key // its turn goes on
	if rot.Used >= fx.weight(q, rot.Key) {
		start = rot.Key + "\x00" // the least key after it
	}
	if start == "" {
		if it, ok := x.plainPick(ks, fit); ok {
			return it, true
		}
		return x.keyedPick(ks, "", "", fit)
	}
	if it, ok := x.keyedPick(ks, start, "", fit); ok {
		return it, true
	}
	if it, ok := x.plainPick(ks, fit); ok {
		return it, true
	}
	return x.keyedPick(ks, "", start, fit)
}

// keyedPick is the job of the first key from from on (before to, when to
// is not "") that has one fit takes.
func (x *index) keyedPick(ks []kind, from, to string, fit func(*need) bool) (readyItem, bool) {
	for {
		key, ok := x.nextKey(ks, from)
		if !ok || (to != "" && key >= to) {
			return readyItem{}, false
		}
		if it, ok := x.keyPick(ks, key, fit); ok {
			return it, true
		}
		from = key + "\x00"
	}
}

// nextKey is the least open key, from from on, with a head in one of ks.
func (x *index) nextKey(ks []kind, from string) (string, bool) {
	var (
		best  string
		found bool
	)
	for _, k := range ks {
		t := x.flow.byKey[k]
		if t == nil {
			continue
		}
		t.AscendGreaterOrEqual(from, func(key string) bool {
			if !found || key < best {
				best, found = key, true
			}
			return false
		})
	}
	return best, found
}

// keyPick is the best job of an open key across ks that fit takes.
func (x *index) keyPick(ks []kind, key string, fit func(*need) bool) (readyItem, bool) {
	var (
		top   readyItem
		found bool
	)
	for _, k := range ks {
		g := x.flow.groups[gkey{k, key}]
		if g == nil {
			continue
		}
		g.Ascend(func(it readyItem) bool {
			if found && !readyLess(it, top) {
				return false
			}
			if it.need == 0 || fit == nil || fit(x.needOf(it)) {
				top, found = it, true
				return false
			}
			return true
		})
	}
	return top, found
}

// plainPick is the best job without a key across ks that fit takes. The
// ready trees hold open keys' heads too, which it passes over.
func (x *index) plainPick(ks []kind, fit func(*need) bool) (readyItem, bool) {
	var (
		top   readyItem
		found bool
	)
	for _, k := range ks {
		t := x.ready[k]
		if t == nil || t.Len() == lenOf(x.flow.byKey[k]) {
			continue // none, or only keys' heads
		}
		t.Ascend(func(it readyItem) bool {
			if found && !readyLess(it, top) {
				return false
			}
			if it.key == 0 && (it.need == 0 || fit == nil || fit(x.needOf(it))) {
				top, found = it, true
				return false
			}
			return true
		})
	}
	return top, found
}

func lenOf(t *btree.BTreeG[string]) int {
	if t == nil {
		return 0
	}
	return t.Len()
}

// turn moves a queue's rotation on by a claim of one of key's jobs ("":
// one without a key).
func (a *applier) turn(q, key string) {
	fx := a.f.idx.flow
	r := fx.rot[q]
	if r.Key == key && r.Used < fx.weight(q, key) {
		r.Used++
	} else {
		r = store.Rotation{Key: key, Used: 1}
	}
	fx.rot[q] = r
	a.must(a.tx.PutRotation(q, r))
}

// Rotation is a queue's place in its rotation over its keys: Key ("" for
// the jobs without one) had Used claims of its turn.
func (f *FSM) Rotation(queue string) store.Rotation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idx.flow.rot[queue]
}
