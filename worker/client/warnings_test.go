package client_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestBatchRepliesCarryTheWarnings submits batches to a real node through a
// proxy that adds a field the server does not know to every job (as an SDK
// newer than the server would send): SubmitBatchReply and
// SubmitBatchIDsReply return the server's warnings with the jobs.
func TestBatchRepliesCarryTheWarnings(t *testing.T) {
	c := clustertest.New(t, 1)
	target, err := url.Parse(c.URL(c.Leader(t)))
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jobs/batch" {
			var body struct {
				Jobs []map[string]any `json:"jobs"`
			}
			if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, j := range body.Jobs {
				j["priorty"] = 5
			}
			data, _ := json.Marshal(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	cl := newClient(t, nil, proxy.URL)
	ctx := t.Context()
	want := []string{`unknown field "jobs[0].priorty"`, `unknown field "jobs[1].priorty"`}

	list, err := cl.SubmitBatchReply(ctx, []wire.SubmitRequest{{Command: "a", Queue: "w"}, {Command: "b", Queue: "w"}})
	if err != nil || len(list.Jobs) != 2 || list.Jobs[0].Command != "a" {
		t.Fatalf("SubmitBatchReply = %+v, %v", list, err)
	}
	if !slices.Equal(list.Warnings, want) {
		t.Fatalf("SubmitBatchReply warnings = %q, want %q", list.Warnings, want)
	}
	ids, err := cl.SubmitBatchIDsReply(ctx, []wire.SubmitRequest{{Command: "c", Queue: "w"}, {Command: "d", Queue: "w"}})
	if err != nil || len(ids.IDs) != 2 || ids.IDs[0] == list.Jobs[0].ID {
		t.Fatalf("SubmitBatchIDsReply = %+v, %v", ids, err)
	}
	if !slices.Equal(ids.Warnings, want) {
		t.Fatalf("SubmitBatchIDsReply warnings = %q, want %q", ids.Warnings, want)
	}
}
