package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/workron/workron/api/wire"
)

// TestSubmitBatchReadsTheIDs: a batch submit asks for the minimal reply
// and records its ids; it also reads the jobs of a server that answers
// them (an older --bin), and counts as an error a reply that does not name
// one job a request, recording none of it.
func TestSubmitBatchReadsTheIDs(t *testing.T) {
	var reply atomic.Value // the body the server answers
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jobs/batch" || r.Header.Get(wire.HeaderPrefer) != wire.PreferMinimal {
			http.Error(w, `{"error":"want a minimal batch"}`, http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, reply.Load().(string))
	}))
	defer srv.Close()
	b := newBencher(Config{Clients: 1, Stderr: io.Discard})
	defer b.hc.CloseIdleConnections()
	body, err := json.Marshal(wire.BatchSubmitRequest{Jobs: []wire.SubmitRequest{{Command: "true"}, {Command: "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, reply string
		want        []string
	}{
		{"TheIDs", `{"ids":["job-1","job-2"]}`, []string{"job-1", "job-2"}},
		{"TheJobsOfAnOlderServer", `{"jobs":[{"id":"job-3"},{"id":"job-4"}]}`, []string{"job-3", "job-4"}},
		{"TooFewIDs", `{"ids":["job-5"]}`, nil},
		{"NoIDs", `{}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply.Store(tc.reply)
			tr := newTracker()
			var errs atomic.Int64
			b.submit(t.Context(), srv.URL, body, 2, tr, &errs)
			if !slices.Equal(tr.order, tc.want) || (errs.Load() == 0) != (tc.want != nil) {
				t.Errorf("recorded %q with %d errors, want %q and an error only if nothing was recorded", tr.order, errs.Load(), tc.want)
			}
		})
	}
}
