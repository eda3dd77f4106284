package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// BenchmarkStatsSeries: GET /stats/series over the last 3 h of 100,000
// jobs submitted in them (the budget's worth), 10 queues.
func BenchmarkStatsSeries(b *testing.B) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(b, start, nil)
	const jobs, batch = 100_000, 1000
	for i := 0; i < jobs; i += batch {
		e.clock.Set(start.Add(time.Duration(i) * 100 * time.Millisecond))
		req := wire.BatchSubmitRequest{}
		for k := range batch {
			req.Jobs = append(req.Jobs, wire.SubmitRequest{Command: "echo hello", Queue: fmt.Sprintf("q%d", (i+k)%10)})
		}
		if code, werr := e.do(http.MethodPost, "/jobs/batch", req, nil); code != http.StatusCreated {
			b.Fatalf("batch: %d %+v", code, werr)
		}
	}
	e.clock.Set(start.Add(3 * time.Hour))
	h := e.srv.Handler() // not the contract check's: it would take most of the time
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/series", nil))
		var s wire.Series
		if err := json.Unmarshal(rec.Body.Bytes(), &s); rec.Code != http.StatusOK || err != nil || s.Scanned != jobs {
			b.Fatalf("%d %v scanned %d", rec.Code, err, s.Scanned)
		}
	}
}
