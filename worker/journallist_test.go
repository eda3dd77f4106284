//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
	"github.com/workron/workron/worker/client"
)

// stepReads counts the GETs of one step (GET /jobs/{id}/steps/{key}), and
// those answered 404, and the pages of a journal's listing.
type stepReads struct {
	next                   http.RoundTripper
	reads, notFound, pages atomic.Int64
}

func (c *stepReads) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if _, key, ok := strings.Cut(r.URL.Path, "/steps"); ok && r.Method == http.MethodGet {
		switch {
		case key == "":
			c.pages.Add(1)
		case err == nil && resp.StatusCode == http.StatusNotFound:
			c.notFound.Add(1)
			c.reads.Add(1)
		default:
			c.reads.Add(1)
		}
	}
	return resp, err
}

// TestStepsResumeLongJournal: the first attempt records 100 steps (more
// than a claim lists), half of them with a null result, then fails. The
// second attempt replays them and runs a new one: it reads the journal's
// listing with results once (one page), and no step of its own, not even
// the 50 with a result; no step ran twice, and each replays its result.
func TestStepsResumeLongJournal(t *testing.T) {
	resumeLongJournal(t, 100, func(i int) any { return i }, 1)
}

// TestStepsResumeLargeJournal: as TestStepsResumeLongJournal, with 40
// results of 150 KiB (6 MB): the listing comes in two pages, bounded by
// the server's 4 MiB of results a page, and still no GET per step.
func TestStepsResumeLargeJournal(t *testing.T) {
	resumeLongJournal(t, 80, func(i int) any { return fmt.Sprintf("%03d%s", i, strings.Repeat("x", 150<<10)) }, 2)
}

// resumeLongJournal records n steps (the odd ones with result(i), the
// even ones null) in a first attempt that then fails, and checks what the
// second attempt read before its first new step: no step, pages pages of
// the listing.
//
// Leases last a minute: under a loaded race run the first attempt's
// heartbeats missed the default TTL, and the attempt stopped unreported
// before its journal was whole.
func resumeLongJournal(t *testing.T, n int, result func(i int) any, pages int64) {
	c := clustertest.New(t, 1, clustertest.WithLeaseTTL(time.Minute))
	reads := &stepReads{next: http.DefaultTransport.(*http.Transport).Clone()}
	ccfg := client.DefaultConfig()
	ccfg.Servers, ccfg.HTTPClient = []string{c.URL(0)}, &http.Client{Transport: reads, Timeout: 30 * time.Second}
	wc, err := client.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.Close)
	cfg := testConfig(t, c.URL(0))
	cfg.Client, cfg.Servers = wc, nil
	runs := &stepCounter{runs: map[string]int{}}
	var got [3]int64 // the second attempt's reads, 404s and pages before its new step
	var replayErr atomic.Value
	startWorker(t, cfg, func(w *worker.Worker) {
		w.Handle("long", func(ctx context.Context, job *worker.Job) error {
			r0, n0, p0 := reads.reads.Load(), reads.notFound.Load(), reads.pages.Load()
			for i := range n {
				name, res := "null", any(nil)
				if i%2 == 1 {
					name, res = "value", result(i)
				}
				out, err := job.Step(ctx, name, runs.step(name, res))
				if err != nil {
					return err
				}
				want, _ := json.Marshal(res)
				if res != nil && !bytes.Equal(out, want) || res == nil && len(out) != 0 && string(out) != "null" {
					replayErr.Store(fmt.Sprintf("attempt %d: step %d returned %.20s (%d bytes), want %.20s", job.Attempt, i, out, len(out), want))
				}
			}
			if job.Attempt == 1 {
				return errors.New("crash after the long journal")
			}
			_, err := job.Step(ctx, "last", func(context.Context) (any, error) {
				got = [3]int64{reads.reads.Load() - r0, reads.notFound.Load() - n0, reads.pages.Load() - p0}
				return "last", nil
			})
			return err
		})
	})
	cl := stepClient(t, c.URL(0))
	three := 3
	j, err := cl.Submit(t.Context(), wire.SubmitRequest{Type: "long", MaxAttempts: &three, Backoff: &wire.Backoff{Base: "1ms"}})
	if err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, cl, j.ID)
	if done.Status != wire.StatusDone || done.Attempts != 2 {
		t.Fatalf("job %s after %d attempts (%s), want done after 2", done.Status, done.Attempts, done.LastError)
	}
	if v := replayErr.Load(); v != nil {
		t.Error(v)
	}
	if runs.count("null") != n/2 || runs.count("value") != n/2 {
		t.Errorf("steps ran %d and %d times, want %d each", runs.count("null"), runs.count("value"), n/2)
	}
	if got[0] != 0 || got[1] != 0 || got[2] != pages {
		t.Errorf("the resume read %d steps (%d not found) and %d listing pages before its new step, want no step and %d pages",
			got[0], got[1], got[2], pages)
	}
}
