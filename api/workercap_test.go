//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestMaxWorkersPerToken: a token's register or claim as one more worker
// id than --max-workers-per-token allows is refused with 429
// too_many_workers, which names the cap and the flag; another token, and
// an id the token holds, are served; an id of the token that went silent
// makes room.
func TestMaxWorkersPerToken(t *testing.T) {
	e := fenceEnv(t)
	e.srv.cfg.MaxWorkersPerToken = 3
	for i := range 3 {
		e.call(http.StatusCreated, "POST", "/workers/register", fleet1, fmt.Sprintf(`{"id":"a%d"}`, i))
	}
	over := func(method, path, body string) {
		t.Helper()
		rec := e.call(http.StatusTooManyRequests, method, path, fleet1, body)
		var werr wire.Error
		mustUnmarshal(t, rec, &werr)
		if werr.Code != wire.CodeTooManyWorkers || !strings.Contains(werr.Error, "3 active worker ids") || !strings.Contains(werr.Error, "--max-workers-per-token") {
			t.Fatalf("%s %s: %+v, want too_many_workers naming the cap of 3 and the flag", method, path, werr)
		}
	}
	over("POST", "/workers/register", `{"id":"a3"}`)
	if _, err := e.srv.state.Worker("a3"); err == nil {
		t.Fatal("a refused registration stored its worker")
	}
	e.call(http.StatusCreated, "POST", "/workers/register", fleet1, `{"id":"a1"}`) // held: no new slot
	e.call(http.StatusCreated, "POST", "/workers/register", fleet2, `{"id":"b0"}`) // its own count
	e.fenceSubmit(`{"command":"true"}`)
	over("POST", "/jobs/claim", `{"worker_id":"a9"}`)
	e.fenceClaim(fleet1, "a0", 1)

	// a1 and a2 go silent; a0 polls on. The next new id frees one silent
	// id (a1, the first), not more.
	e.clock.Add(e.srv.live.OfflineAfter() / 2)
	e.call(http.StatusCreated, "POST", "/workers/register", fleet1, `{"id":"a0"}`)
	e.clock.Add(e.srv.live.OfflineAfter()/2 + time.Second)
	e.call(http.StatusCreated, "POST", "/workers/register", fleet1, `{"id":"a3"}`)
	if got := e.srv.state.ActiveWorkerIDs("fleet1"); strings.Join(got, ",") != "a0,a2,a3" {
		t.Fatalf("fleet1's active ids %v, want a0,a2,a3", got)
	}
}

// TestMaxWorkersPerTokenWithoutTokens: without tokens every worker counts
// in one bucket, under the same cap.
func TestMaxWorkersPerTokenWithoutTokens(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), func(c *Config) { c.MaxWorkersPerToken = 2 })
	for _, id := range []string{"w1", "w2", "w1"} {
		if code, werr := e.do(http.MethodPost, "/workers/register", `{"id":"`+id+`"}`, nil); code != http.StatusCreated {
			t.Fatalf("register %s: %d %+v", id, code, werr)
		}
	}
	if code, werr := e.do(http.MethodPost, "/workers/register", `{"id":"w3"}`, nil); code != http.StatusTooManyRequests || werr.Code != wire.CodeTooManyWorkers {
		t.Fatalf("register w3: %d %+v, want 429 too_many_workers", code, werr)
	}
}
