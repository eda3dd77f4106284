package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
)

// awaitingProposer is a proposer whose cluster protocol is known only
// after AwaitProtocol waited for it (a member not heard from yet, as
// raftnode.Node has it): ClusterProtocol says 1 until then. It keeps the
// commands proposed.
type awaitingProposer struct {
	*env
	protocol int

	mu   sync.Mutex
	cmds []fsm.Cmd
}

func (p *awaitingProposer) ClusterProtocol() int { return 1 }

func (p *awaitingProposer) AwaitProtocol(context.Context) int { return p.protocol }

func (p *awaitingProposer) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	p.mu.Lock()
	p.cmds = append(p.cmds, cmd)
	p.mu.Unlock()
	return p.env.Propose(ctx, cmd)
}

// TestLoopsChooseFormsOnceTheProtocolIsKnown: a leader loop with a choice
// of forms asks for the cluster's protocol once every member's is known
// (AwaitProtocol), not as known this instant: a member not heard from yet
// must not make the reaper propose the older, unchunked expiry.
func TestLoopsChooseFormsOnceTheProtocolIsKnown(t *testing.T) {
	e := newEnv(t, t0)
	p := &awaitingProposer{env: e, protocol: fsm.ProtocolCascade}
	ctx := context.Background()
	if got := chunkedOp(ctx, p, fsm.OpCancel, fsm.OpCancelChunked); got != fsm.OpCancelChunked {
		t.Errorf("chunkedOp = %s, want %s once the protocol is known to be %d", got, fsm.OpCancelChunked, p.protocol)
	}
	if got := clusterProtocol(ctx, e); got != 1 {
		t.Errorf("a proposer that says no protocol counts as %d, want 1", got)
	}

	e.claimOne(0, time.Minute)
	r := e.reaper(time.Time{})
	r.cfg.Proposer = p
	e.clock.Add(2 * time.Minute)
	if n := r.runOnce(ctx); n != 1 {
		t.Fatalf("expired %d leases, want 1", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cmds) != 1 || p.cmds[0].Expire == nil || !p.cmds[0].Expire.Chunked {
		t.Errorf("the reaper proposed %+v, want one chunked expiry", p.cmds)
	}
}
