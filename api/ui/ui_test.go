package ui_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/workron/workron/api/ui"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHandler(t *testing.T) {
	h := ui.Handler()
	get := func(t *testing.T, path string, header ...string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	t.Run("BareUIRedirectsToTheSlash", func(t *testing.T) {
		rec := get(t, "/ui")
		if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/ui/" {
			t.Fatalf("GET /ui: %d Location %q, want 301 to /ui/", rec.Code, rec.Header().Get("Location"))
		}
	})

	t.Run("SlashServesThePageWithAStrictPolicy", func(t *testing.T) {
		rec := get(t, "/ui/")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /ui/: %d", rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("Content-Type %q, want text/html", ct)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("Content-Security-Policy %q does not keep the page to its own node", csp)
		}
		body := rec.Body.String()
		for _, want := range []string{`src="app.js"`, `src="charts.js"`, `href="style.css"`, `id="view"`} {
			if !strings.Contains(body, want) {
				t.Errorf("index.html lacks %s", want)
			}
		}
	})

	t.Run("FilesNeedNothingFromOutside", func(t *testing.T) {
		for _, name := range []string{"index.html", "app.js", "charts.js", "style.css", "favicon.svg"} {
			rec := get(t, "/ui/"+name)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /ui/%s: %d", name, rec.Code)
			}
			// The dashboard must work offline: no CDN, no web font. The
			// SVG namespace is a name, not a fetch.
			body := strings.ReplaceAll(rec.Body.String(), "http://www.w3.org/2000/svg", "")
			for _, bad := range []string{"http://", "https://", "@import", "//cdn", "fonts.googleapis"} {
				if strings.Contains(body, bad) {
					t.Errorf("%s contains %q", name, bad)
				}
			}
		}
		if ct := get(t, "/ui/app.js").Header().Get("Content-Type"); !strings.Contains(ct, "javascript") {
			t.Errorf("app.js Content-Type %q", ct)
		}
	})

	t.Run("UnchangedFilesAnswerNotModified", func(t *testing.T) {
		etag := get(t, "/ui/app.js").Header().Get("ETag")
		if etag == "" {
			t.Fatal("no ETag")
		}
		if rec := get(t, "/ui/app.js", "If-None-Match", etag); rec.Code != http.StatusNotModified {
			t.Errorf("If-None-Match %s: %d, want 304", etag, rec.Code)
		}
	})

	t.Run("UnknownFilesAre404InTheAPIShape", func(t *testing.T) {
		for _, p := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/../go.mod", "/ui/app.js/"} {
			rec := get(t, p)
			if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"not_found"`) {
				t.Errorf("GET %s: %d %s, want 404 not_found", p, rec.Code, rec.Body)
			}
		}
	})
}
