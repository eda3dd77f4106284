package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/fsmtest"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// loneNode is a one-member "cluster" that applies each proposal to its FSM
// at once, stamped with the test clock (fsmtest.Applier): enough for
// handlers and leader loops, with no Raft underneath.
type loneNode struct {
	*fsmtest.Applier
	restoreDir string // where NewRestoreFile makes its files
}

var _ Raft = (*loneNode)(nil)

func (n *loneNode) ProposeAll(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, []error) {
	results, errs := make([]fsm.Result, len(cmds)), make([]error, len(cmds))
	for i, c := range cmds {
		results[i], errs[i] = n.Propose(ctx, c)
	}
	return results, errs
}

func (n *loneNode) IsLeader() bool                                    { return true }
func (n *loneNode) Leader() (string, string)                          { return "n1", "127.0.0.1:1" }
func (n *loneNode) LeaderChanged() <-chan struct{}                    { return nil }
func (n *loneNode) VerifyLeader(context.Context) error                { return nil }
func (n *loneNode) ID() string                                        { return "n1" }
func (n *loneNode) RaftAddr() string                                  { return "127.0.0.1:1" }
func (n *loneNode) Role() string                                      { return "leader" }
func (n *loneNode) Servers() ([]raftnode.Server, error)               { return nil, nil }
func (n *loneNode) AddNonvoter(context.Context, string, string) error { return nil }
func (n *loneNode) RemoveServer(context.Context, string) error        { return nil }
func (n *loneNode) TransferLeadership(context.Context) error          { return nil }
func (n *loneNode) Removed() bool                                     { return false }
func (n *loneNode) Stats() raftnode.Stats                             { return raftnode.Stats{} }
func (n *loneNode) AppliedIndex() uint64                              { return n.FSM.Applied() }
func (n *loneNode) CommitIndex() uint64                               { return n.FSM.Applied() }
func (n *loneNode) WriteBackup(io.Writer) (int64, error)              { return 0, nil }
func (n *loneNode) ClusterProtocol() int                              { return fsm.ProtocolVersion }
func (n *loneNode) SetMemberProtocols(map[string]int)                 {}
func (n *loneNode) AwaitProtocol(context.Context) int                 { return fsm.ProtocolVersion }
func (n *loneNode) NewRestoreFile() (*os.File, error) {
	return os.CreateTemp(n.restoreDir, "restore-upload-*.db")
}

// RestoreFile verifies the backup and says it restored it.
func (n *loneNode) RestoreFile(_ context.Context, path string) (raftnode.RestoreInfo, error) {
	info, err := store.Verify(path)
	if err != nil {
		return raftnode.RestoreInfo{Info: info}, fmt.Errorf("restore: %w", err)
	}
	return raftnode.RestoreInfo{Info: info, Index: info.Applied + 1}, nil
}

// schedEnv is a Server over a loneNode, driven by a test clock.
type schedEnv struct {
	t     testing.TB
	clock *fsmtest.Clock
	node  *loneNode
	srv   *Server
	h     http.Handler
}

// newSchedEnv starts a Server at start; mutate may change its Config.
func newSchedEnv(t testing.TB, start time.Time, mutate func(*Config)) *schedEnv {
	t.Helper()
	a := fsmtest.NewApplier(t, start)
	clock, f := a.Clock, a.FSM
	node := &loneNode{Applier: a, restoreDir: t.TempDir()}
	cfg := DefaultConfig()
	cfg.Node, cfg.State, cfg.AdvertiseHTTP, cfg.Now = node, f, "http://127.0.0.1:1", clock.Now
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &schedEnv{t: t, clock: clock, node: node, srv: srv, h: contractHandler(t, srv.Handler())}
}

// do sends a request and decodes a JSON reply into out (if not nil).
func (e *schedEnv) do(method, path string, body any, out any) (int, wire.Error) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(method, path, rd))
	var werr wire.Error
	if rec.Code >= 400 {
		_ = json.Unmarshal(rec.Body.Bytes(), &werr)
	} else if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			e.t.Fatalf("%s %s: decode %q: %v", method, path, rec.Body.String(), err)
		}
	}
	return rec.Code, werr
}

// create makes a schedule and fails the test unless that gave 201.
func (e *schedEnv) create(req wire.ScheduleRequest) wire.Schedule {
	e.t.Helper()
	var sc wire.Schedule
	if code, werr := e.do(http.MethodPost, "/schedules", req, &sc); code != http.StatusCreated {
		e.t.Fatalf("create schedule %s: %d %+v", req.Name, code, werr)
	}
	return sc
}

// scheduledJobs lists the jobs of a schedule, oldest first.
func (e *schedEnv) scheduledJobs(name string) []*store.Job {
	e.t.Helper()
	jobs, _, err := e.srv.state.ListJobs(store.ListQuery{Match: func(j *store.Job) bool { return j.Schedule == name }})
	if err != nil {
		e.t.Fatal(err)
	}
	for i, k := 0, len(jobs)-1; i < k; i, k = i+1, k-1 {
		jobs[i], jobs[k] = jobs[k], jobs[i]
	}
	return jobs
}

func (e *schedEnv) digest() string {
	e.t.Helper()
	d, err := e.srv.state.Digest()
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}
