package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
)

// BenchmarkSubmitRequest serves POST /jobs, one job each, through the
// whole handler chain (request id, metrics, leader route, decoding,
// validation, proposing, the reply) over a node that answers each submit
// with the job the first one created, without applying it: the
// allocations and time of the request path alone, without Raft or the
// state machine.
//
//	go test ./api -run '^$' -bench SubmitRequest -benchmem
func BenchmarkSubmitRequest(b *testing.B) {
	serve := submitServer(b, "/jobs", `{"command":"echo hi","queue":"bench","max_attempts":3}`)
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

// BenchmarkBatchSubmitRequest is BenchmarkSubmitRequest for POST
// /jobs/batch with 1,000 jobs shaped like workron bench's submit_batch
// ones; it reports allocs/job and B/job.
//
//	go test ./api -run '^$' -bench BatchSubmitRequest -benchmem
func BenchmarkBatchSubmitRequest(b *testing.B) {
	const per = 1000
	serve := submitServer(b, "/jobs/batch", `{"jobs":[`+strings.Repeat(`{"command":"true","queue":"bench"},`, per-1)+`{"command":"true","queue":"bench"}]}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/per, "allocs/job")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/per, "B/job")
}

// submitServer returns a function that POSTs body to path through the
// handler chain of a node answering every submit with the first one's
// result (answeringNode), and fails b unless the reply is 201. It serves
// that first submit before returning.
func submitServer(b *testing.B, path, body string) func() {
	b.Helper()
	var node *answeringNode
	env := newSchedEnv(b, time.Now(), func(cfg *Config) {
		node = &answeringNode{loneNode: cfg.Node.(*loneNode)}
		cfg.Node = node
	})
	h := env.srv.Handler()
	serve := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		if rec.Code != http.StatusCreated {
			b.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	serve() // the result every later submit is answered with
	return serve
}

// answeringNode applies its first submit and answers every later one with
// that result.
type answeringNode struct {
	*loneNode
	first *fsm.Result
}

func (n *answeringNode) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	if n.first != nil && cmd.Op == fsm.OpSubmit {
		return *n.first, nil
	}
	res, err := n.loneNode.Propose(ctx, cmd)
	if err == nil && cmd.Op == fsm.OpSubmit {
		n.first = &res
	}
	return res, err
}
