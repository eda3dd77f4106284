package bench

import (
	"context"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// stageReading is one reading of the leader's workron_raft_stage_seconds
// histograms and of workron_jobs_handed_off_total.
type stageReading struct {
	// sums is the sum and count of each stage, by stage name.
	sums map[string][2]float64
	// buckets is each stage's cumulative bucket counts, by upper bound
	// (seconds; +Inf for the last).
	buckets map[string]map[float64]float64
	// handedOff is the jobs handed off, summed over queues.
	handedOff float64
}

// stageSums reads the leader's stage histograms and the jobs handed off.
func (b *bencher) stageSums(ctx context.Context, leader string) stageReading {
	out := stageReading{sums: make(map[string][2]float64), buckets: make(map[string]map[float64]float64)}
	for line := range strings.Lines(b.metricsText(ctx, leader)) {
		series, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		v, _ := strconv.ParseFloat(val, 64)
		if strings.HasPrefix(series, "workron_jobs_handed_off_total{") {
			out.handedOff += v
			continue
		}
		name, labels, ok := strings.Cut(series, `{stage="`)
		if !ok {
			continue
		}
		stage, rest, _ := strings.Cut(labels, `"`)
		s := out.sums[stage]
		switch name {
		case "workron_raft_stage_seconds_sum":
			s[0] = v
		case "workron_raft_stage_seconds_count":
			s[1] = v
		case "workron_raft_stage_seconds_bucket":
			_, le, ok := strings.Cut(rest, `le="`)
			le, _, _ = strings.Cut(le, `"`)
			bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses
			if !ok || err != nil {
				continue
			}
			if out.buckets[stage] == nil {
				out.buckets[stage] = make(map[float64]float64)
			}
			out.buckets[stage][bound] = v
			continue
		default:
			continue
		}
		out.sums[stage] = s
	}
	return out
}

// stageMeans is the mean milliseconds of each stage between two readings
// of stageSums, for the entries proposed meanwhile.
func stageMeans(before, after stageReading) map[string]float64 {
	out := make(map[string]float64)
	for stage, a := range after.sums {
		b := before.sums[stage]
		if n := a[1] - b[1]; n > 0 {
			out[stage] = math.Round((a[0]-b[0])/n*1e6) / 1e3
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stageTails is each stage's 99th percentile and maximum between two
// readings: the upper bound (ms) of the first bucket that holds 99 % of
// the entries observed meanwhile, and of the highest bucket that grew;
// -1 when that is the top bucket (over 1 s: JSON has no +Inf).
func stageTails(before, after stageReading) (p99, most map[string]float64) {
	p99, most = make(map[string]float64), make(map[string]float64)
	ms := func(le float64) float64 {
		if math.IsInf(le, 1) {
			return -1
		}
		return math.Round(le*1e6) / 1e3
	}
	for stage, a := range after.buckets {
		bounds := slices.Sorted(maps.Keys(a))
		if len(bounds) == 0 {
			continue
		}
		total := a[bounds[len(bounds)-1]] - before.buckets[stage][bounds[len(bounds)-1]]
		if total <= 0 {
			continue
		}
		for _, le := range bounds {
			if a[le]-before.buckets[stage][le] >= 0.99*total {
				p99[stage] = ms(le)
				break
			}
		}
		for _, le := range bounds {
			if a[le]-before.buckets[stage][le] >= total {
				most[stage] = ms(le)
				break
			}
		}
	}
	if len(p99) == 0 {
		return nil, nil
	}
	return p99, most
}

// handedOffDuring is how many jobs the leader handed to waiting workers
// between two readings of stageSums.
func handedOffDuring(before, after stageReading) float64 {
	return after.handedOff - before.handedOff
}
