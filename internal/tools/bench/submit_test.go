package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestSubmitBatchMetadataShape: submit_batch_metadata's requests carry n
// typed jobs, none with a command, spread over its queues, types and
// concurrency keys, each with every metadata key of a value no other job
// has, and a batch of one is sent as a single job.
func TestSubmitBatchMetadataShape(t *testing.T) {
	var mu sync.Mutex
	var got []wire.SubmitRequest
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var jobs []wire.SubmitRequest
		if r.URL.Path == "/jobs/batch" {
			var req wire.BatchSubmitRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			jobs = req.Jobs
		} else {
			var req wire.SubmitRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			jobs = []wire.SubmitRequest{req}
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, jobs...)
		var ids []string
		for range jobs {
			next++
			ids = append(ids, fmt.Sprintf("job-%d", next))
		}
		w.WriteHeader(http.StatusCreated)
		if r.URL.Path == "/jobs/batch" {
			_ = json.NewEncoder(w).Encode(map[string][]string{"ids": ids})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"id": ids[0]})
	}))
	defer srv.Close()
	b := newBencher(Config{Clients: 1, Stderr: io.Discard})
	defer b.hc.CloseIdleConnections()
	queues := []string{"q0", "q1", "q2", "q3"}
	const n = 2*benchBatchSize + 1 // two batches and a single job
	tr := newTracker()
	var errs atomic.Int64
	b.submitShaped(t.Context(), srv.URL, wire.SubmitRequest{}, b.metadataShape(queues), n, benchBatchSize, 2, time.Time{}, tr, &errs)
	if errs.Load() != 0 || tr.accepted() != n || len(got) != n {
		t.Fatalf("%d errors, %d accepted, %d jobs sent; want 0, %d, %d", errs.Load(), tr.accepted(), len(got), n, n)
	}
	values := map[string]bool{}
	inQueue, types, keys := map[string]int{}, map[string]bool{}, map[string]bool{}
	for _, j := range got {
		if j.Command != "" || j.Type == "" || j.ConcurrencyKey == "" || !slices.Contains(queues, j.Queue) || len(j.Metadata) != len(benchMetaFields) {
			t.Fatalf("job %+v: want a typed job of a concurrency key, one of queues %v and metadata %v", j, queues, benchMetaFields)
		}
		inQueue[j.Queue]++
		types[j.Type], keys[j.ConcurrencyKey] = true, true
		for _, k := range benchMetaFields {
			v := j.Metadata[k]
			if v == "" || values[k+"="+v] {
				t.Errorf("metadata %s=%q is empty or another job's", k, v)
			}
			values[k+"="+v] = true
		}
	}
	if len(inQueue) != len(queues) || len(types) != benchMetaTypes || len(keys) != benchMetaKeys {
		t.Errorf("jobs in queues %v, %d types, %d keys; want every queue, %d types, %d keys", inQueue, len(types), len(keys), benchMetaTypes, benchMetaKeys)
	}
}
