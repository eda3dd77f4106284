package store

import (
	"bytes"
	"encoding/json"
)

// ParkCounts returns how many jobs are parked on each kind of step
// (StepSleep, StepWait, StepInvoke: what a Park's Kind says), walking at
// most limit of the parks; complete is false when more were left. It only
// reads: one key per parked job, its kind read from the start of the value
// (Park's JSON begins with its kind) without decoding the rest.
func (t *Tx) ParkCounts(limit int) (counts map[string]int, complete bool) {
	counts = make(map[string]int, 3)
	prefix := []byte{'p'}
	cur := t.tx.Bucket(bucketParks).Cursor()
	n := 0
	for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
		if n == limit {
			return counts, false
		}
		n++
		counts[parkKind(v)]++
	}
	return counts, true
}

// parkKind is the Kind of the Park encoded in v.
func parkKind(v []byte) string {
	const head = `{"kind":"`
	if rest, ok := bytes.CutPrefix(v, []byte(head)); ok {
		kind, _, _ := bytes.Cut(rest, []byte(`"`))
		switch string(kind) { // no allocation: compared, not kept
		case StepSleep:
			return StepSleep
		case StepWait:
			return StepWait
		case StepInvoke:
			return StepInvoke
		}
	}
	var p Park
	_ = json.Unmarshal(v, &p)
	return p.Kind
}
