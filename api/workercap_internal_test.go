package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// TestRegistrationPastTheCapNeverReachesTheLog: once a token holds its cap
// of active worker ids (and none is silent), a registration of one more id
// is answered 429 without a command being proposed, so a flood of them
// costs the cluster nothing; an id it already holds still registers.
func TestRegistrationPastTheCapNeverReachesTheLog(t *testing.T) {
	var node *recordingNode
	env := newSchedEnv(t, time.Now(), func(cfg *Config) {
		node = &recordingNode{loneNode: cfg.Node.(*loneNode)}
		cfg.Node = node
		cfg.MaxWorkersPerToken = 3
	})
	for i := range 3 {
		if code, werr := env.do(http.MethodPost, "/workers/register", wire.Worker{ID: fmt.Sprintf("w%d", i)}, nil); code != http.StatusCreated {
			t.Fatalf("register w%d: %d %+v", i, code, werr)
		}
	}
	// The three are fresh: none is silent, none can make room.
	registers := func() int {
		node.mu.Lock()
		defer node.mu.Unlock()
		n := 0
		for _, c := range node.cmds {
			if c.Op == fsm.OpRegister {
				n++
			}
		}
		return n
	}
	before := registers()
	for i := range 50 {
		code, werr := env.do(http.MethodPost, "/workers/register", wire.Worker{ID: fmt.Sprintf("flood%d", i)}, nil)
		if code != http.StatusTooManyRequests || werr.Code != wire.CodeTooManyWorkers {
			t.Fatalf("register past the cap: %d %+v, want 429 too_many_workers", code, werr)
		}
	}
	if got := registers() - before; got != 0 {
		t.Errorf("%d registrations past the cap were proposed, want none", got)
	}
	if code, werr := env.do(http.MethodPost, "/workers/register", wire.Worker{ID: "w1"}, nil); code != http.StatusCreated {
		t.Errorf("register an id the token holds: %d %+v", code, werr)
	}
}
