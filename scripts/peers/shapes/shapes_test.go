package shapes

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePeer is an in-memory queue system; its faults let the tests see the
// runner's checks catch what a broken peer does.
type fakePeer struct {
	batch bool

	mu      sync.Mutex
	waiting map[string][]int64
	done    map[string]int
	wake    chan struct{}

	runTwice int64 // this seq's handler runs twice
	loseOne  bool  // the first insert answers success but stores nothing
	failSeq  int64 // inserting this seq fails (-1: none)
}

func newFakePeer() *fakePeer {
	return &fakePeer{waiting: map[string][]int64{}, done: map[string]int{}, wake: make(chan struct{}, 1), runTwice: -1, failSeq: -1}
}

func (p *fakePeer) Label() string    { return "fake" }
func (p *fakePeer) Settings() string { return "in memory" }
func (p *fakePeer) CanBatch() bool   { return p.batch }
func (p *fakePeer) Close()           {}

func (p *fakePeer) Insert(_ context.Context, queue string, seqs []int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range seqs {
		if s == p.failSeq {
			return errors.New("refused")
		}
	}
	if p.loseOne {
		p.loseOne = false
		return nil
	}
	p.waiting[queue] = append(p.waiting[queue], seqs...)
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

func (p *fakePeer) Work(ctx context.Context, queue string, workers int, started func(int64)) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				p.mu.Lock()
				q := p.waiting[queue]
				if len(q) == 0 {
					p.mu.Unlock()
					select {
					case <-p.wake:
					case <-ctx.Done():
					case <-time.After(time.Millisecond):
					}
					continue
				}
				seq := q[0]
				p.waiting[queue] = q[1:]
				p.mu.Unlock()
				started(seq)
				if seq == p.runTwice {
					started(seq)
				}
				p.mu.Lock()
				p.done[queue]++
				p.mu.Unlock()
			}
		})
	}
	return func() { cancel(); wg.Wait() }, nil
}

func (p *fakePeer) Counts(_ context.Context, queue string) (int, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting[queue]), p.done[queue], nil
}

func newTestRunner(p Peer, jobs int) *runner {
	f := Flags{Clients: 4, Jobs: jobs, Rate: 500, Duration: 100 * time.Millisecond}
	return &runner{f: f, p: p, stderr: io.Discard, runID: "t"}
}

func TestScenariosPassOnAFaithfulPeer(t *testing.T) {
	p := newFakePeer()
	p.batch = true
	r := newTestRunner(p, 300)
	for _, s := range Scenarios {
		figs, err := r.run(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if len(figs) == 0 {
			t.Fatalf("%s: no figures", s)
		}
		for _, fg := range figs {
			if !fg.Correct || fg.Value <= 0 || fg.Jobs == 0 {
				t.Errorf("%s: %+v, want a correct positive Figure", fg.Figure, fg)
			}
		}
	}
	if got := p.done[r.queue("claim_done")]; got != 300 {
		t.Errorf("claim_done ran %d jobs, want 300", got)
	}
}

func TestSubmitBatchSkippedWithoutBatchInsert(t *testing.T) {
	figs, err := newTestRunner(newFakePeer(), 10).run(context.Background(), "submit_batch")
	if err != nil || len(figs) != 0 {
		t.Fatalf("submit_batch without batch insert = %v, %v; want no Figure", figs, err)
	}
}

func TestClaimDoneFailsWhenAJobRunsTwice(t *testing.T) {
	p := newFakePeer()
	p.runTwice = 7
	figs, err := newTestRunner(p, 50).run(context.Background(), "claim_done")
	if err != nil {
		t.Fatal(err)
	}
	if figs[0].Correct || !strings.Contains(figs[0].Problems, "job 7 started 2 times") {
		t.Fatalf("claim_done with a job run twice: correct %v, problems %q", figs[0].Correct, figs[0].Problems)
	}
}

func TestSubmitFailsWhenTheStoreLosesAJob(t *testing.T) {
	p := newFakePeer()
	p.loseOne = true
	figs, err := newTestRunner(p, 20).run(context.Background(), "submit_single")
	if err != nil {
		t.Fatal(err)
	}
	if figs[0].Correct || !strings.Contains(figs[0].Problems, "store holds 19 waiting") {
		t.Fatalf("submit_single losing a job: correct %v, problems %q", figs[0].Correct, figs[0].Problems)
	}
}

func TestSubmitCountsFailedInserts(t *testing.T) {
	p := newFakePeer()
	p.failSeq = 3
	figs, err := newTestRunner(p, 20).run(context.Background(), "submit_single")
	if err != nil {
		t.Fatal(err)
	}
	fg := figs[0]
	if fg.Correct || fg.Errors != 1 || fg.Jobs != 19 || !strings.Contains(fg.Problems, "1 of 20 inserts failed") {
		t.Fatalf("submit_single with a refused insert: %+v", fg)
	}
}

func TestLatencyMeasuresEveryJob(t *testing.T) {
	figs, err := newTestRunner(newFakePeer(), 1).run(context.Background(), "latency")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"latency_p50", "latency_p99", "latency_max"}
	for i, fg := range figs {
		// 500 jobs/s for 100ms: 50 jobs.
		if fg.Figure != want[i] || fg.Jobs != 50 || !fg.Correct || fg.Unit != "ms" {
			t.Errorf("Figure %d = %+v, want %s over 50 jobs", i, fg, want[i])
		}
	}
	if !(figs[0].Value <= figs[1].Value && figs[1].Value <= figs[2].Value) {
		t.Errorf("percentiles out of order: %v %v %v", figs[0].Value, figs[1].Value, figs[2].Value)
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ p, want float64 }{{0.5, 5}, {0.99, 10}, {1, 10}, {0, 1}} {
		if got := percentile(v, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestFlagsValidate(t *testing.T) {
	for _, c := range []struct {
		f    Flags
		want string
	}{
		{Flags{Clients: 0, Jobs: 1, Rate: 1, Duration: time.Second}, "--clients"},
		{Flags{Clients: 1, Jobs: 1, Rate: 0, Duration: time.Second}, "--rate"},
		{Flags{Clients: 1, Jobs: 1, Rate: 1, Duration: 0}, "--duration"},
		{Flags{Clients: 1, Jobs: 1, Rate: 1, Duration: time.Second, Scenarios: "claim_done_batched"}, "unknown scenario"},
	} {
		err := c.f.Validate(nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", c.f, err, c.want)
		}
	}
	f := Flags{Short: true, Clients: 1, Jobs: 20000, Rate: 1, Duration: time.Minute}
	if err := f.Validate(map[string]bool{"duration": true}); err != nil || f.Jobs != 2000 || f.Duration != time.Minute {
		t.Errorf("--short = jobs %d duration %s (%v), want 2000 and the given minute", f.Jobs, f.Duration, err)
	}
}
