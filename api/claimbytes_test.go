//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// TestClaimReplyBytesBounded: a claim of many large jobs answers those
// that fit fsm.DefaultMaxClaimBytes (at least one), not Max of them; the
// others stay pending, never leased, and the next claim gets them.
func TestClaimReplyBytesBounded(t *testing.T) {
	e := newSchedEnv(t, schedT0, nil)
	const n = 24 // some 740 KiB each: 17 MiB in all
	big := func(k int) map[string]string {
		m := make(map[string]string, MaxMapEntries-4)
		for i := range MaxMapEntries - 4 {
			m[fmt.Sprintf("%c%02d", k, i)] = strings.Repeat("v", MaxMapValueBytes-100)
		}
		return m
	}
	payload := json.RawMessage(`"` + strings.Repeat("p", MaxPayloadBytes-100) + `"`)
	for range n {
		req := wire.SubmitRequest{Type: "big", Payload: payload, Env: big('e'), Metadata: big('m')}
		if code, werr := e.do(http.MethodPost, "/jobs", req, nil); code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, werr)
		}
	}
	claim := func() (int, int) {
		var raw rawBody
		if code, werr := e.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: "w", Types: []string{"big"}, Max: fsm.MaxClaim}, &raw); code != http.StatusOK {
			t.Fatalf("claim: %d %+v", code, werr)
		}
		var res wire.ClaimResponse
		decodeRaw(t, raw, &res)
		return len(res.Jobs), len(raw)
	}
	got, size := claim()
	if got == 0 || got >= n || size > fsm.DefaultMaxClaimBytes+64<<10 {
		t.Fatalf("claim of %d jobs of 740 KiB answered %d in %d bytes; want fewer than all, within %d bytes", n, got, size, fsm.DefaultMaxClaimBytes)
	}
	var pending wire.JobList
	e.do(http.MethodGet, "/jobs?status=pending&limit=100", nil, &pending)
	if len(pending.Jobs) != n-got {
		t.Fatalf("%d jobs pending after a claim of %d, want %d", len(pending.Jobs), got, n-got)
	}
	if rest, _ := claim(); rest != n-got {
		t.Fatalf("the next claim got %d jobs, want the %d left", rest, n-got)
	}
}
