package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workron/workron/api/wire"
)

// Tokens of the auth tests, one per role, and one with two roles.
const (
	adminToken  = "admin-token-0123456789"
	clientToken = "client-token-0123456789"
	workerToken = "worker-token-0123456789"
	bothToken   = "client+worker-0123456789"
)

const testTokenFile = `
# role(s)       token                     name
worker          ` + workerToken + `
admin           ` + adminToken + `   ops
client          ` + clientToken + `
client,worker   ` + bothToken + `  ci
`

func testTokens(t *testing.T) *Tokens {
	t.Helper()
	tok, err := ParseTokens(strings.NewReader(testTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestParseTokens(t *testing.T) {
	t.Run("ReadsRolesAndNames", func(t *testing.T) {
		tok := testTokens(t)
		if got := tok.NodeToken(); got != adminToken {
			t.Errorf("NodeToken = %q, want the first admin token", got)
		}
		for tk, want := range map[string]string{workerToken: "line 3", adminToken: "ops", bothToken: "ci"} {
			e, ok := tok.lookup(tk)
			if !ok || e.name != want {
				t.Errorf("lookup(%s) = %v, %v; want name %q", tk, e, ok, want)
			}
		}
		if _, ok := tok.lookup("nope-nope-nope-nope"); ok {
			t.Error("an unknown token was found")
		}
		if _, ok := tok.lookup(adminToken[:len(adminToken)-1]); ok {
			t.Error("a prefix of a token was found")
		}
	})

	t.Run("PrintingShowsNoToken", func(t *testing.T) {
		tok := testTokens(t)
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "tokens", tok)
		fmt.Fprintf(&buf, "%v %+v %#v %s", tok, tok, tok, tok)
		for _, s := range []string{adminToken, clientToken, workerToken, bothToken} {
			if strings.Contains(buf.String(), s) {
				t.Fatalf("printed tokens show %s: %s", s, buf.String())
			}
		}
	})

	bad := map[string]string{
		"UnknownRole":  "root " + adminToken,
		"ShortToken":   "admin short",
		"NoToken":      "admin",
		"TooManyWords": "admin " + adminToken + " name extra",
		"SameTwice":    "admin " + adminToken + "\nclient " + adminToken,
		"Empty":        "# nothing\n\n",
		"ControlChar":  "admin " + adminToken + "\x01",
	}
	for name, file := range bad {
		t.Run("Refuses"+name, func(t *testing.T) {
			_, err := ParseTokens(strings.NewReader(file))
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), adminToken[:10]) {
				t.Errorf("the error quotes the token: %v", err)
			}
		})
	}
}

// authEnv is a Server with Auth on and a log of what it wrote.
func authEnv(t *testing.T, mutate func(*Config)) (*schedEnv, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), func(c *Config) {
		c.Auth = testTokens(t)
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.MaxWait = 0
		c.Pprof = true // its routes are in the table too
		if mutate != nil {
			mutate(c)
		}
	})
	return e, &logs
}

// request sends one request with a bearer token ("" for none).
func (e *schedEnv) request(method, path, token, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// samplePath turns a route pattern into a method and a path that matches it.
func samplePath(pattern string) (string, string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern+"nowhere"
	}
	path = strings.NewReplacer("{id}", "x", "{name}", "x", "{$}", "").Replace(path)
	return method, path
}

func TestAuth(t *testing.T) {
	t.Run("EveryRouteOfTheTableIsRegistered", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		for pattern := range routeRoles {
			method, path := samplePath(pattern)
			_, got := e.srv.mux.Handler(httptest.NewRequest(method, path, nil))
			if got != pattern {
				t.Errorf("%s %s is routed to %q, not %q", method, path, got, pattern)
			}
		}
	})

	t.Run("RequestsAreCountedByRoute", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e, _ := authEnv(t, func(c *Config) { c.Registry = reg })
		e.request(http.MethodGet, "/jobs", clientToken, "")
		e.request(http.MethodGet, "/jobs", "", "") // refused: 401
		e.request(http.MethodGet, "/no/such/route", adminToken, "")
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "workron_http_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				n[l["route"]+" "+l["status"]] += m.GetCounter().GetValue()
			}
		}
		for key, want := range map[string]float64{"GET /jobs 200": 1, "GET /jobs 401": 1, "/ 404": 1} {
			if n[key] != want {
				t.Errorf("requests %q = %v, want %v (all: %v)", key, n[key], want, n)
			}
		}
	})

	t.Run("RoutesNotInTheTableNeedAdmin", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		if got := e.srv.requiredRole("POST /something/new"); got != RoleAdmin {
			t.Errorf("an unknown route needs %q, want admin", got)
		}
	})

	t.Run("EachRoleOpensItsRoutesOnly", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		tokens := map[Role]string{RoleAdmin: adminToken, RoleClient: clientToken, RoleWorker: workerToken}
		for pattern, need := range routeRoles {
			method, path := samplePath(pattern)
			for role, tok := range tokens {
				rec := e.request(method, path, tok, "")
				refused := rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden
				allowed := need == routeOpen || need == routeAny || role == RoleAdmin || role == need
				if also, ok := routeAlsoNeeds[pattern]; ok && role != RoleAdmin && role != also.role {
					allowed = false // one role of the two
				}
				if refused == allowed {
					t.Errorf("%s with a %s token: HTTP %d %s", pattern, role, rec.Code, rec.Body)
				}
				if refused && (rec.Code != http.StatusForbidden || errorCode(t, rec) != "forbidden") {
					t.Errorf("%s with a %s token: want 403 forbidden, got %d %s", pattern, role, rec.Code, rec.Body)
				}
			}
			if rec := e.request(method, path, bothToken, ""); need != RoleAdmin && isAuthError(rec.Code) {
				t.Errorf("%s with a client,worker token: HTTP %d", pattern, rec.Code)
			}
		}
	})

	t.Run("AnInvokeNeedsTheClientRoleToo", func(t *testing.T) {
		// A worker token runs nothing by itself: an invoke would let it
		// submit any job, so it needs the client role as well.
		e, _ := authEnv(t, nil)
		rec := e.request(http.MethodPost, "/jobs/job-1/steps/child/invoke", workerToken, `{"lease":1,"job":{"command":"id"}}`)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "client role") {
			t.Errorf("an invoke with a worker token: %d %s, want 403 naming the client role", rec.Code, rec.Body)
		}
		if rec := e.request(http.MethodPost, "/jobs/job-1/steps/child/invoke", bothToken, `{"lease":1,"job":{"command":"id"}}`); isAuthError(rec.Code) {
			t.Errorf("an invoke with a client,worker token: %d %s", rec.Code, rec.Body)
		}
	})

	t.Run("NoTokenGets401WithAChallenge", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		for _, tc := range []struct{ name, header string }{
			{"Missing", ""},
			{"WrongScheme", "Basic " + clientToken},
			{"EmptyBearer", "Bearer "},
			{"UnknownToken", "Bearer not-a-token-of-this-node"},
			{"TokenPrefix", "Bearer " + clientToken[:len(clientToken)-1]},
		} {
			req := httptest.NewRequest(http.MethodGet, "/jobs", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized || errorCode(t, rec) != "unauthorized" {
				t.Errorf("%s: want 401 unauthorized, got %d %s", tc.name, rec.Code, rec.Body)
			}
			if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate = %q", tc.name, rec.Header().Get("WWW-Authenticate"))
			}
		}
	})

	t.Run("SchemeIsCaseInsensitive", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		req := httptest.NewRequest(http.MethodGet, "/jobs", nil)
		req.Header.Set("Authorization", "bearer "+clientToken)
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("got %d %s", rec.Code, rec.Body)
		}
	})

	t.Run("HealthAndDashboardStayOpen", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		for _, p := range []string{"/health", "/ui/", "/ui/app.js", "/", "/no/such/route"} {
			if rec := e.request(http.MethodGet, p, "", ""); isAuthError(rec.Code) {
				t.Errorf("GET %s without a token: %d", p, rec.Code)
			}
		}
	})

	t.Run("MetricsNeedAnyTokenUnlessOpen", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		if rec := e.request(http.MethodGet, "/metrics", "", ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("GET /metrics without a token: %d", rec.Code)
		}
		if rec := e.request(http.MethodGet, "/metrics", workerToken, ""); rec.Code != http.StatusOK {
			t.Errorf("GET /metrics with a worker token: %d", rec.Code)
		}
		open, _ := authEnv(t, func(c *Config) { c.MetricsOpen = true })
		if rec := open.request(http.MethodGet, "/metrics", "", ""); rec.Code != http.StatusOK {
			t.Errorf("GET /metrics without a token, MetricsOpen: %d", rec.Code)
		}
	})

	t.Run("WorkFlowsWithTheRightRoles", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		if rec := e.request(http.MethodPost, "/jobs", clientToken, `{"command":"true"}`); rec.Code != http.StatusCreated {
			t.Fatalf("submit: %d %s", rec.Code, rec.Body)
		}
		rec := e.request(http.MethodPost, "/jobs/claim", workerToken, `{"worker_id":"w","shell":true}`)
		var cr wire.ClaimResponse
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &cr) != nil || len(cr.Jobs) != 1 {
			t.Fatalf("claim: %d %s", rec.Code, rec.Body)
		}
		if rec := e.request(http.MethodPost, "/jobs/"+cr.Jobs[0].ID+"/done", clientToken, ""); rec.Code != http.StatusForbidden {
			t.Errorf("done with a client token: %d", rec.Code)
		}
		lease := fmt.Sprintf(`{"lease":%d}`, cr.Jobs[0].Lease) // a claimed attempt's report needs its lease
		if rec := e.request(http.MethodPost, "/jobs/"+cr.Jobs[0].ID+"/done", workerToken, lease); rec.Code != http.StatusOK {
			t.Errorf("done with a worker token: %d %s", rec.Code, rec.Body)
		}
	})

	t.Run("TokensNeverReachTheLog", func(t *testing.T) {
		e, logs := authEnv(t, nil)
		for _, tok := range []string{adminToken, clientToken, workerToken, "wrong-token-but-secret-too"} {
			e.request(http.MethodPost, "/cluster/join", tok, `{}`)
			e.request(http.MethodGet, "/backup", tok, "")
			e.request(http.MethodPost, "/jobs?token="+tok, tok, `{"command":"true"}`)
		}
		if logs.Len() == 0 {
			t.Fatal("nothing was logged: the check proves nothing")
		}
		for _, tok := range []string{adminToken, clientToken, workerToken, "wrong-token-but-secret-too"} {
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, tok) && !strings.Contains(line, "?token=") {
					t.Errorf("a log line holds a token: %s", line)
				}
			}
		}
	})

	t.Run("PeersGetTheNodeToken", func(t *testing.T) {
		e, _ := authEnv(t, nil)
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "http://peer/cluster/join", nil)
		e.srv.authorize(req)
		if got := req.Header.Get("Authorization"); got != "Bearer "+adminToken {
			t.Errorf("Authorization = %q", got)
		}
	})
}

func isAuthError(code int) bool {
	return code == http.StatusUnauthorized || code == http.StatusForbidden
}

func errorCode(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e wire.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	return e.Code
}

func TestJoinNeedsMemberCert(t *testing.T) {
	e, _ := authEnv(t, func(c *Config) { c.Auth, c.JoinNeedsMemberCert = nil, true })
	body := `{"id":"n9","raft":"127.0.0.1:9","http":"https://127.0.0.1:9"}`
	t.Run("WithoutACertificateIsRefused", func(t *testing.T) {
		rec := e.request(http.MethodPost, "/cluster/join", "", body)
		if rec.Code != http.StatusForbidden || errorCode(t, rec) != "forbidden" {
			t.Fatalf("got %d %s", rec.Code, rec.Body)
		}
	})
	join := func(leaf *x509.Certificate) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/cluster/join", strings.NewReader(body))
		req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}, PeerCertificates: []*x509.Certificate{leaf}}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	t.Run("WithAVerifiedNodeCertificateIsServed", func(t *testing.T) {
		node := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		if rec := join(node); rec.Code != http.StatusOK {
			t.Fatalf("got %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("WithAVerifiedClientCertificateIsRefused", func(t *testing.T) {
		// workron tls client: signed by the cluster's CA, for client
		// authentication only. It is no member's.
		client := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if rec := join(client); rec.Code != http.StatusForbidden {
			t.Fatalf("got %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("OtherRoutesNeedNone", func(t *testing.T) {
		if rec := e.request(http.MethodGet, "/jobs", "", ""); rec.Code != http.StatusOK {
			t.Fatalf("got %d %s", rec.Code, rec.Body)
		}
	})
}
