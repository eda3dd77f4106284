package api

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

func TestPprof(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	t.Run("IsNotFoundWithoutTheFlag", func(t *testing.T) {
		e := newSchedEnv(t, start, nil)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap"} {
			if rec := e.request(http.MethodGet, path, "", ""); rec.Code != http.StatusNotFound || errorCode(t, rec) != "not_found" {
				t.Errorf("GET %s: want 404 not_found, got %d %s", path, rec.Code, rec.Body)
			}
		}
	})

	t.Run("ServesTheHeapProfileWithTheFlag", func(t *testing.T) {
		e := newSchedEnv(t, start, func(c *Config) { c.Pprof = true })
		rec := e.request(http.MethodGet, "/debug/pprof/heap", "", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /debug/pprof/heap: HTTP %d %s", rec.Code, rec.Body)
		}
		if !bytes.HasPrefix(rec.Body.Bytes(), []byte{0x1f, 0x8b}) { // a gzipped profile.proto
			t.Errorf("GET /debug/pprof/heap: not a gzipped profile: %q", rec.Body.Bytes()[:min(16, rec.Body.Len())])
		}
		if rec := e.request(http.MethodGet, "/debug/pprof/nothing", "", ""); rec.Code != http.StatusNotFound {
			t.Errorf("GET /debug/pprof/nothing: want 404, got %d", rec.Code)
		}
	})

	t.Run("NeedsAnAdminTokenWithAuth", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		for tok, want := range map[string]int{"": http.StatusUnauthorized, clientToken: http.StatusForbidden, workerToken: http.StatusForbidden, adminToken: http.StatusOK} {
			if rec := e.request(http.MethodGet, "/debug/pprof/heap", tok, ""); rec.Code != want {
				t.Errorf("GET /debug/pprof/heap with token %q: want %d, got %d", tok, want, rec.Code)
			}
		}
	})
}
