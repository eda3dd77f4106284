package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// browserCase is one request a web page might make a browser send.
type browserCase struct {
	name    string
	method  string
	path    string
	host    string   // default 127.0.0.1:7070
	headers []string // name, value, ...
	body    string
	status  int
	code    string // of an error reply
}

func (c browserCase) request() *http.Request {
	r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	r.Host = "127.0.0.1:7070"
	if c.host != "" {
		r.Host = c.host
	}
	if c.host == "-" {
		r.Host = ""
	}
	for i := 0; i+1 < len(c.headers); i += 2 {
		r.Header.Add(c.headers[i], c.headers[i+1])
	}
	return r
}

// runBrowserCases sends each case to a fresh node and checks its status,
// its error code, and that a request refused at the door changed nothing
// (a 404 is the handler's, after a proposal).
func runBrowserCases(t *testing.T, mutate func(*Config), cases []browserCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), mutate)
			h := e.srv.Handler()
			before := e.digest()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tc.request())
			if rec.Code != tc.status {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.code != "" {
				var werr wire.Error
				if err := json.Unmarshal(rec.Body.Bytes(), &werr); err != nil || werr.Code != tc.code {
					t.Fatalf("got %s, want code %q", rec.Body, tc.code)
				}
				if tc.status != 404 && e.digest() != before {
					t.Fatal("a refused request changed the state")
				}
			}
		})
	}
}

const submitJSON = `{"command":"touch /tmp/pwned"}`

func TestBrowserGuardCrossOrigin(t *testing.T) {
	runBrowserCases(t, nil, []browserCase{
		{name: "ScriptWithoutBrowserHeadersSubmits", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json"}, status: 201},
		{name: "CrossSiteFetchIsRefused", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"},
			status:  403, code: wire.CodeCrossOrigin},
		{name: "SameSiteOtherPortIsRefused", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:8080"},
			status:  403, code: wire.CodeCrossOrigin},
		{name: "OldBrowserOtherOriginIsRefused", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Origin", "https://evil.example"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "OldBrowserLocalhostIsAnotherOrigin", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Origin", "http://localhost:7070"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "SandboxedPageIsRefused", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Origin", "null"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "CrossSiteCancelWithoutBodyIsRefused", method: "POST", path: "/jobs/job-1/cancel",
			headers: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "CrossSiteDeleteIsRefused", method: "DELETE", path: "/schedules/nightly",
			headers: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "TheDashboardSubmits", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin", "Origin", "http://127.0.0.1:7070"}, status: 201},
		{name: "OldBrowserSameOriginSubmits", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Origin", "http://127.0.0.1:7070"}, status: 201},
		{name: "TypedURLSubmits", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Sec-Fetch-Site", "none"}, status: 201},
		{name: "CrossSiteImageCannotClaim", method: "GET", path: "/jobs/next?worker_id=evil",
			headers: []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Dest", "image"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "CrossSiteHEADCannotClaim", method: "HEAD", path: "/jobs/next?worker_id=evil",
			headers: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "OldBrowserCrossOriginFetchCannotClaim", method: "GET", path: "/jobs/next?worker_id=evil",
			headers: []string{"Origin", "https://evil.example"}, status: 403, code: wire.CodeCrossOrigin},
		{name: "SeedWorkerClaims", method: "GET", path: "/jobs/next?worker_id=w1", status: 204},
		{name: "CrossSiteReadIsLeftToTheBrowser", method: "GET", path: "/health",
			headers: []string{"Sec-Fetch-Site", "cross-site"}, status: 200},
	})
}

func TestBrowserGuardContentType(t *testing.T) {
	ct := func(v string) []string { return []string{"Content-Type", v} }
	runBrowserCases(t, nil, []browserCase{
		{name: "JSONSubmits", method: "POST", path: "/jobs", body: submitJSON, headers: ct("application/json"), status: 201},
		{name: "JSONWithCharsetSubmits", method: "POST", path: "/jobs", body: submitJSON, headers: ct("Application/JSON; charset=utf-8"), status: 201},
		{name: "NoContentTypeSubmits", method: "POST", path: "/jobs", body: submitJSON, status: 201},
		{name: "TextPlainIsRefused", method: "POST", path: "/jobs", body: submitJSON, headers: ct("text/plain"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "TextPlainWithCharsetIsRefused", method: "POST", path: "/jobs", body: submitJSON, headers: ct("text/plain;charset=UTF-8"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "FormIsRefused", method: "POST", path: "/jobs", body: `{"command":"x","y":"=z"}`, headers: ct("application/x-www-form-urlencoded"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "MultipartIsRefused", method: "POST", path: "/jobs", body: submitJSON, headers: ct("multipart/form-data; boundary=x"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "OctetStreamIsNoSubmit", method: "POST", path: "/jobs", body: submitJSON, headers: ct("application/octet-stream"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "TwoContentTypesAreRefused", method: "POST", path: "/jobs", body: submitJSON,
			headers: []string{"Content-Type", "application/json", "Content-Type", "text/plain"}, status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "UnparsableContentTypeIsRefused", method: "POST", path: "/jobs", body: submitJSON, headers: ct("application/json; =x"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "BodylessFormPostIsRefused", method: "POST", path: "/queues/default/pause", headers: ct("application/x-www-form-urlencoded"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "TextPlainPUTIsRefused", method: "PUT", path: "/queues/q", body: `{"concurrency":1}`, headers: ct("text/plain"),
			status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "CheckpointTakesRawBytes", method: "POST", path: "/jobs/job-9/checkpoint?epoch=1", body: "state",
			headers: ct("application/octet-stream"), status: 404, code: wire.CodeNotFound},
		{name: "CheckpointRefusesTextPlain", method: "POST", path: "/jobs/job-9/checkpoint?epoch=1", body: "state",
			headers: ct("text/plain"), status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "RestoreRefusesAForm", method: "POST", path: "/restore", body: "a=b",
			headers: ct("multipart/form-data; boundary=x"), status: 415, code: wire.CodeUnsupportedMediaType},
		{name: "SeedHeartbeatWithoutBodyPasses", method: "POST", path: "/jobs/job-9/heartbeat", status: 404, code: wire.CodeNotFound},
	})
}

func TestBrowserGuardHost(t *testing.T) {
	checked := func(c *Config) { c.CheckHost, c.AllowedHosts = true, []string{"workron.internal", "Jobs.Example.COM."} }
	get := func(name, host string, status int, code string) browserCase {
		return browserCase{name: name, method: "GET", path: "/health", host: host, status: status, code: code}
	}
	t.Run("Checked", func(t *testing.T) {
		runBrowserCases(t, checked, []browserCase{
			get("Localhost", "localhost:7070", 200, ""),
			get("LocalhostWithoutPort", "localhost", 200, ""),
			get("UnderLocalhost", "app.localhost:7070", 200, ""),
			get("LoopbackIPv4", "127.0.0.1:7070", 200, ""),
			get("LoopbackIPv6", "[::1]:7070", 200, ""),
			get("LoopbackIPv6WithoutPort", "[::1]", 200, ""),
			get("AnyIPLiteral", "10.1.2.3:7070", 200, ""),
			get("TheAdvertisedHost", "127.0.0.1:1", 200, ""),
			get("AnAllowedHost", "workron.internal:7001", 200, ""),
			get("AnAllowedHostInAnotherCase", "JOBS.example.com.", 200, ""),
			get("NoHost", "-", 200, ""),
			get("ARebindingName", "evil.example:7070", 403, wire.CodeHostNotAllowed),
			get("ARebindingNameEndingInLocalhost", "evillocalhost:7070", 403, wire.CodeHostNotAllowed),
			get("ASubdomainOfAnAllowedHost", "a.workron.internal", 403, wire.CodeHostNotAllowed),
			{name: "ARebindingSubmit", method: "POST", path: "/jobs", host: "evil.example:7070", body: submitJSON,
				headers: []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin", "Origin", "http://evil.example:7070"},
				status:  403, code: wire.CodeHostNotAllowed},
		})
	})
	t.Run("NotChecked", func(t *testing.T) {
		runBrowserCases(t, nil, []browserCase{get("AnyName", "evil.example:7070", 200, "")})
	})
	t.Run("Star", func(t *testing.T) {
		runBrowserCases(t, func(c *Config) { c.CheckHost, c.AllowedHosts = true, []string{"*"} },
			[]browserCase{get("AnyName", "evil.example:7070", 200, "")})
	})
}
