package bench

import (
	"maps"
	"math"
	"runtime/metrics"
	"testing"
)

// TestStageP99sReadTheBucketsOfThePhase: a stage's p99 is the bound of
// the first bucket holding 99 % of the entries observed between two
// readings, not since the node started; the top bucket reads as -1.
func TestStageP99sReadTheBucketsOfThePhase(t *testing.T) {
	inf := math.Inf(1)
	before := stageReading{buckets: map[string]map[float64]float64{
		"queue":     {0.001: 0, 0.01: 0, 0.1: 1000, inf: 1000}, // slow entries before the phase
		"replicate": {0.001: 0, 0.01: 0, 0.1: 0, inf: 0},
	}}
	after := stageReading{buckets: map[string]map[float64]float64{
		"queue":     {0.001: 99, 0.01: 100, 0.1: 1100, inf: 1100},
		"replicate": {0.001: 50, 0.01: 50, 0.1: 50, inf: 100},
		"apply":     {0.001: 0, inf: 0}, // nothing during the phase
	}}
	want := map[string]float64{"queue": 1, "replicate": -1}
	if got := stageP99s(before, after); !maps.Equal(got, want) {
		t.Errorf("stageP99s = %v, want %v", got, want)
	}
}

// TestGCPauseMaxIsTheHighestBucketThatGrew: the longest pause of a phase
// is the upper bound of the highest bucket whose count grew, the lower
// bound for the open top bucket, and 0 without a pause.
func TestGCPauseMaxIsTheHighestBucketThatGrew(t *testing.T) {
	reading := func(counts ...uint64) gcReading {
		return gcReading{pauses: &metrics.Float64Histogram{Counts: counts, Buckets: []float64{0, 0.001, 0.01, math.Inf(1)}}}
	}
	for _, tc := range []struct {
		name          string
		before, after gcReading
		want          float64
	}{
		{"UpTo10ms", reading(5, 1, 0), reading(9, 2, 0), 10},
		{"OnlyBeforeThePhase", reading(5, 1, 3), reading(6, 1, 3), 1},
		{"TheTopBucket", reading(0, 0, 0), reading(0, 0, 1), 10},
		{"None", reading(5, 1, 3), reading(5, 1, 3), 0},
	} {
		if got := gcPauseMax(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: gcPauseMax = %v ms, want %v", tc.name, got, tc.want)
		}
	}
}
