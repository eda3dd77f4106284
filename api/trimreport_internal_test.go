package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// recordingNode is a loneNode that keeps every command it is asked to
// propose.
type recordingNode struct {
	*loneNode
	mu   sync.Mutex
	cmds []fsm.Cmd
}

func (n *recordingNode) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	n.mu.Lock()
	n.cmds = append(n.cmds, cmd)
	n.mu.Unlock()
	return n.loneNode.Propose(ctx, cmd)
}

func (n *recordingNode) ProposeAll(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, []error) {
	results, errs := make([]fsm.Result, len(cmds)), make([]error, len(cmds))
	for i, c := range cmds {
		results[i], errs[i] = n.Propose(ctx, c)
	}
	return results, errs
}

// TestReportsAreTrimmedBeforeTheLog: a report's output and error reach the
// log as what the FSM keeps of them (fsm.TrimOutput), not whole, so a
// worker's 1 MiB output costs the log 4 KiB; the job ends as it would have.
func TestReportsAreTrimmedBeforeTheLog(t *testing.T) {
	var node *recordingNode
	env := newSchedEnv(t, time.Now(), func(cfg *Config) {
		node = &recordingNode{loneNode: cfg.Node.(*loneNode)}
		cfg.Node = node
	})
	big := strings.Repeat("é", 200<<10) + "the end" // 400 KiB, multi-byte
	for _, route := range []string{"done", "fail", "reports"} {
		t.Run(route, func(t *testing.T) {
			var j wire.Job
			if code, werr := env.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "true", Queue: "trim-" + route}, &j); code != http.StatusCreated {
				t.Fatalf("submit: %d %+v", code, werr)
			}
			var cr wire.ClaimResponse
			if code, werr := env.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: "w-" + route, Queues: []string{"trim-" + route}}, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
				t.Fatalf("claim: %d %+v %d jobs", code, werr, len(cr.Jobs))
			}
			lease := cr.Jobs[0].Lease
			no := false
			rep := wire.ReportRequest{Lease: lease, Output: big, Error: big, Retry: &no}
			switch route {
			case "reports":
				var br wire.BatchReportResponse
				body := wire.BatchReportRequest{Reports: []wire.BatchReport{{JobID: j.ID, Status: "failed", ReportRequest: rep}}}
				if code, werr := env.do(http.MethodPost, "/jobs/reports", body, &br); code != http.StatusOK {
					t.Fatalf("reports: %d %+v", code, werr)
				}
			default:
				if code, werr := env.do(http.MethodPost, "/jobs/"+j.ID+"/"+route, rep, nil); code != http.StatusOK {
					t.Fatalf("%s: %d %+v", route, code, werr)
				}
			}
			node.mu.Lock()
			last := node.cmds[len(node.cmds)-1]
			node.mu.Unlock()
			if last.Op != fsm.OpReport || last.Report == nil {
				t.Fatalf("last command %s, want a report", last.Op)
			}
			if len(last.Report.Output) > fsm.MaxOutput || len(last.Report.Error) > fsm.MaxOutput {
				t.Errorf("the report proposed carries %d bytes of output and %d of error, want at most %d", len(last.Report.Output), len(last.Report.Error), fsm.MaxOutput)
			}
			var got wire.Job
			if code, werr := env.do(http.MethodGet, "/jobs/"+j.ID, nil, &got); code != http.StatusOK {
				t.Fatalf("get: %d %+v", code, werr)
			}
			if want := fsm.TrimOutput(big); got.Output != want || !strings.HasSuffix(got.Output, "the end") {
				t.Errorf("job output %d bytes ending %q, want the last %d bytes", len(got.Output), got.Output[max(0, len(got.Output)-10):], len(want))
			}
		})
	}
}
