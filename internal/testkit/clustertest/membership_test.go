package clustertest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestRemovedNodeAnswersRemoved sends submits to a follower, one every
// 10 ms, from before it is removed until its /health says so: each gets
// the leader's answer (forwarded while the node still knows the leader) or
// 503 removed, none a 503 no_leader after the whole leader wait (a request
// that arrived after the node lost the leader, before it counted itself
// removed).
func TestRemovedNodeAnswersRemoved(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.Leader(t)
	f := c.Followers(t)[0]

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		replies []reply
		stop    = make(chan struct{})
	)
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range 1000 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				r, err := try(http.MethodPost, c.URL(f)+"/jobs", wire.SubmitRequest{Command: "true"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				replies = append(replies, r)
				mu.Unlock()
			})
		}
	})
	call(t, http.StatusOK, http.MethodDelete, c.URL(lead)+"/cluster/nodes/"+c.Node(f).ID(), nil)
	clustertest.WaitFor(t, 10*time.Second, func() error {
		r, err := try(http.MethodGet, c.URL(f)+"/health", nil)
		if err != nil {
			return err
		}
		var h wire.Health
		if err := json.Unmarshal(r.Body, &h); err != nil || h.Status != wire.HealthRemoved {
			return fmt.Errorf("%s not removed yet: %s", c.Node(f).ID(), r)
		}
		return nil
	})
	close(stop)
	wg.Wait()

	removed := 0
	for _, r := range replies {
		var e wire.Error
		_ = json.Unmarshal(r.Body, &e)
		switch {
		case r.Status == http.StatusCreated:
		case r.Status == http.StatusServiceUnavailable && e.Code == wire.CodeRemoved:
			removed++
		default:
			t.Errorf("a submit to the node being removed: %s", r)
		}
	}
	t.Logf("%d submits: %d answered 503 removed", len(replies), removed)
}
