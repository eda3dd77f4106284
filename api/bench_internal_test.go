package api

import (
	"context"
	"net/http"
	"net/http/httptest"
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
	const body = `{"command":"echo hi","queue":"bench","max_attempts":3}`
	var node *answeringNode
	env := newSchedEnv(b, time.Now(), func(cfg *Config) {
		node = &answeringNode{loneNode: cfg.Node.(*loneNode)}
		cfg.Node = node
	})
	h := env.srv.Handler()
	serve := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/jobs", strings.NewReader(body)))
		if rec.Code != http.StatusCreated {
			b.Fatalf("POST /jobs: %d %s", rec.Code, rec.Body)
		}
	}
	serve() // the job every later submit is answered with
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
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
