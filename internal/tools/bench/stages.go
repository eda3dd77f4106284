package bench

import (
	"context"
	"math"
	"strconv"
	"strings"
)

// handedOff is the key of stageSums' reading of workron_jobs_handed_off_total
// (summed over queues, in [0]).
const handedOff = "handed_off"

// stageSums reads the leader's workron_raft_stage_seconds histograms: the
// sum and count of each stage, by stage name; and the jobs handed off.
func (b *bencher) stageSums(ctx context.Context, leader string) map[string][2]float64 {
	out := make(map[string][2]float64)
	for line := range strings.Lines(b.metricsText(ctx, leader)) {
		series, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.HasPrefix(series, "workron_jobs_handed_off_total{") {
			v, _ := strconv.ParseFloat(val, 64)
			s := out[handedOff]
			s[0] += v
			out[handedOff] = s
			continue
		}
		name, labels, ok := strings.Cut(series, `{stage="`)
		if !ok {
			continue
		}
		stage, _, _ := strings.Cut(labels, `"`)
		v, _ := strconv.ParseFloat(val, 64)
		s := out[stage]
		switch name {
		case "workron_raft_stage_seconds_sum":
			s[0] = v
		case "workron_raft_stage_seconds_count":
			s[1] = v
		default:
			continue
		}
		out[stage] = s
	}
	return out
}

// stageMeans is the mean milliseconds of each stage between two readings
// of stageSums, for the entries proposed meanwhile.
func stageMeans(before, after map[string][2]float64) map[string]float64 {
	out := make(map[string]float64)
	for stage, a := range after {
		b := before[stage]
		if stage == handedOff {
			continue
		}
		if n := a[1] - b[1]; n > 0 {
			out[stage] = math.Round((a[0]-b[0])/n*1e6) / 1e3
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// handedOffDuring is how many jobs the leader handed to waiting workers
// between two readings of stageSums.
func handedOffDuring(before, after map[string][2]float64) float64 {
	return after[handedOff][0] - before[handedOff][0]
}
