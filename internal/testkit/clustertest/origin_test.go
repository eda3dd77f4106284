package clustertest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
)

// TestForwardedBrowserWrites: a browser that predates Sec-Fetch-Site, on
// the dashboard of a follower, sends that follower's origin as Origin. The
// follower checks it and forwards the write to the leader, whose own Host
// is another: the leader must not take it for a page of another origin.
// A page of another origin is refused by the follower itself.
func TestForwardedBrowserWrites(t *testing.T) {
	c := newCluster(t, 3)
	f := c.Followers(t)[0]
	post := func(origin string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, c.URL(f)+"/jobs", strings.NewReader(`{"command":"echo from the dashboard"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e wire.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code
	}
	if st, code := post(c.URL(f)); st != http.StatusCreated {
		t.Fatalf("the follower's own page: %d %s, want 201", st, code)
	}
	if st, code := post("https://evil.example"); st != http.StatusForbidden || code != wire.CodeCrossOrigin {
		t.Fatalf("another origin: %d %s, want 403 %s", st, code, wire.CodeCrossOrigin)
	}
}
