package bench

import (
	"maps"
	"math"
	"runtime/metrics"
	"testing"
)

// TestStageTailsReadTheBucketsOfThePhase: a stage's p99 is the bound of
// the first bucket holding 99 % of the entries observed between two
// readings, not since the node started, its max the bound of the highest
// bucket that grew; the top bucket reads as -1.
func TestStageTailsReadTheBucketsOfThePhase(t *testing.T) {
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
	wantP99 := map[string]float64{"queue": 1, "replicate": -1}
	wantMax := map[string]float64{"queue": 10, "replicate": -1}
	if p99, most := stageTails(before, after); !maps.Equal(p99, wantP99) || !maps.Equal(most, wantMax) {
		t.Errorf("stageTails = p99 %v, max %v; want %v, %v", p99, most, wantP99, wantMax)
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
