package store

import (
	"encoding/json"
	"fmt"
)

// The parks bucket keeps how many jobs are parked on each kind of step
// under 'k' kind (a uint64), kept by PutPark and DeletePark in the same
// transaction as the parks, so that counting them reads three keys
// however many jobs are parked; Verify recounts them (checkParkTotals).

func parkTotalKey(kind string) []byte { return append([]byte{'k'}, kind...) }

// ParkCounts returns how many jobs are parked on each kind of step
// (StepSleep, StepWait, StepInvoke: what a Park's Kind says).
func (t *Tx) ParkCounts() map[string]int {
	b := t.tx.Bucket(bucketParks)
	counts := make(map[string]int, 3)
	for _, kind := range []string{StepSleep, StepWait, StepInvoke} {
		if v := b.Get(parkTotalKey(kind)); v != nil {
			counts[kind] = int(getUint(v))
		}
	}
	return counts
}

// addParked moves the total of kind by delta.
func (t *Tx) addParked(kind string, delta int) error {
	b := t.tx.Bucket(bucketParks)
	k := parkTotalKey(kind)
	n := int64(0)
	if v := b.Get(k); v != nil {
		n = int64(getUint(v))
	}
	n += int64(delta)
	if n < 0 {
		return fmt.Errorf("parked jobs of kind %q would be %d: the totals do not match the parks", kind, n)
	}
	if n == 0 {
		return b.Delete(k)
	}
	return b.Put(k, putUint(uint64(n)))
}

// parkedKind is the kind of job jobID's park; found is false when it has
// none.
func (t *Tx) parkedKind(jobID string) (kind string, found bool, err error) {
	v := t.tx.Bucket(bucketParks).Get(parkKey(jobID))
	if v == nil {
		return "", false, nil
	}
	var p struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(v, &p); err != nil {
		return "", true, fmt.Errorf("park of job %s: %w", jobID, err)
	}
	return p.Kind, true, nil
}

// checkParkTotals compares the totals with counted, the parks by kind
// (Verify).
func (t *Tx) checkParkTotals(counted map[string]int) error {
	totals := t.ParkCounts()
	for _, kind := range []string{StepSleep, StepWait, StepInvoke} {
		if totals[kind] != counted[kind] {
			return fmt.Errorf("parked jobs of kind %q: the total says %d, the parks hold %d", kind, totals[kind], counted[kind])
		}
		delete(counted, kind)
	}
	for kind, n := range counted {
		return fmt.Errorf("%d jobs parked on a step of unknown kind %q", n, kind)
	}
	return nil
}
