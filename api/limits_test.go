package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestMaxLongPolls(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), func(c *Config) {
		c.MaxLongPolls = 1
		c.MaxWait = time.Minute
	})
	claim := func(ctx context.Context, worker, wait string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		body := `{"worker_id":"` + worker + `","shell":true,"wait":"` + wait + `"}`
		e.h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/jobs/claim", strings.NewReader(body)))
		return rec
	}

	// One claim parks and takes the only slot.
	ctx, cancel := context.WithCancel(context.Background())
	parked := make(chan *httptest.ResponseRecorder, 1)
	go func() { parked <- claim(ctx, "w1", "1m") }()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.srv.polls) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first claim never parked")
		}
		time.Sleep(time.Millisecond)
	}

	t.Run("AClaimBeyondTheCapGets429", func(t *testing.T) {
		rec := claim(context.Background(), "w2", "30s")
		if rec.Code != http.StatusTooManyRequests || errorCode(t, rec) != "overloaded" {
			t.Fatalf("want 429 overloaded, got %d %s", rec.Code, rec.Body)
		}
		if rec.Header().Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
	})

	t.Run("AClaimThatDoesNotWaitIsServed", func(t *testing.T) {
		if rec := claim(context.Background(), "w2", "0s"); rec.Code != http.StatusOK {
			t.Fatalf("got %d %s", rec.Code, rec.Body)
		}
	})

	t.Run("AClaimBeyondTheCapStillTakesAReadyJob", func(t *testing.T) {
		// The parked claim may take the job first; submit two.
		for range 2 {
			if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, nil); code != http.StatusCreated {
				t.Fatalf("submit: %d %+v", code, werr)
			}
		}
		rec := claim(context.Background(), "w3", "30s")
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"lease"`) {
			t.Fatalf("want a job, got %d %s", rec.Code, rec.Body)
		}
	})

	cancel()
	<-parked
	t.Run("TheSlotIsFreedWhenTheClaimEnds", func(t *testing.T) {
		if n := len(e.srv.polls); n != 0 {
			t.Fatalf("%d slots still taken", n)
		}
	})
}
