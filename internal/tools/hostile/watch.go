package hostile

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
)

// watcher probes /health on every node and samples every node's resident
// memory while an attack runs.
type watcher struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	lat     []time.Duration
	failed  int
	maxRSS  int64
	maxTerm uint64
}

func (e *env) watch(ctx context.Context) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel}
	for _, n := range e.cluster.Nodes {
		w.wg.Add(2)
		go func() {
			defer w.wg.Done()
			every(ctx, healthInterval, func() { w.probe(ctx, e.probe, n.URL) })
		}()
		go func() {
			defer w.wg.Done()
			every(ctx, rssInterval, func() { w.sampleRSS(n.Pid()) })
		}()
	}
	return w
}

func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *watcher) probe(ctx context.Context, hc *http.Client, base string) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return
	}
	resp, err := hc.Do(req)
	took := time.Since(start)
	if ctx.Err() != nil {
		return // the watch ended mid-probe: not the node's doing
	}
	var h wire.Health
	ok := err == nil && resp.StatusCode == http.StatusOK
	if err == nil {
		ok = ok && json.NewDecoder(resp.Body).Decode(&h) == nil
		resp.Body.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lat = append(w.lat, took)
	if !ok {
		w.failed++
	}
	w.maxTerm = max(w.maxTerm, h.Term)
}

func (w *watcher) sampleRSS(pid int) {
	if pid <= 0 {
		return
	}
	rss := residentBytes(pid)
	w.mu.Lock()
	w.maxRSS = max(w.maxRSS, rss)
	w.mu.Unlock()
}

// residentBytes is a process's VmRSS (0 where /proc does not say).
func residentBytes(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// stop ends the watch and writes what it saw into res.
func (w *watcher) stop(res *Result) {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	slices.Sort(w.lat)
	res.HealthP50, res.HealthP99 = quantile(w.lat, 0.50), quantile(w.lat, 0.99)
	if len(w.lat) > 0 {
		res.HealthMax = w.lat[len(w.lat)-1]
	}
	res.HealthFailed = w.failed
	res.MaxRSS = w.maxRSS
	if w.maxTerm > res.TermBefore && res.TermAfter < w.maxTerm {
		res.TermAfter = w.maxTerm
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

// term is the highest term any node reports now (0 if none answers).
func (e *env) term(ctx context.Context) uint64 {
	var t uint64
	for _, n := range e.cluster.Nodes {
		var h wire.Health
		if st, _, err := e.cluster.Get(ctx, n.URL+"/health", &h); err == nil && st == http.StatusOK {
			t = max(t, h.Term)
		}
	}
	return t
}
