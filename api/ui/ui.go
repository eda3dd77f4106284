// Package ui serves Workron's web dashboard: a few hand-written static files
// (HTML, CSS, vanilla JavaScript) embedded in the binary, so every node
// serves it at /ui/ with no build step, no separate service and nothing
// fetched from the internet. The page reads and changes the cluster only
// through the node's public JSON API, with relative URLs; this package holds
// no state, reads nothing from the cluster and imports nothing of the server.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
)

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

//go:embed static
var static embed.FS

// contentSecurityPolicy allows only the node itself: no CDN, no inline
// script, no third-party connection.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file with its validator.
type asset struct {
	name string
	body []byte
	etag string
}

// Handler serves the dashboard: GET /ui redirects to /ui/, /ui/ is the page,
// /ui/NAME its files. Anything else under /ui/ is 404. Files are revalidated
// with an ETag on every load, so an upgraded node serves its new page at once.
func Handler() http.Handler {
	assets := make(map[string]*asset)
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		name := strings.TrimPrefix(p, "static/")
		assets[name] = &asset{name: name, body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a build bug.
		panic("ui: reading embedded files: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path+"/" == Prefix {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name, _ := strings.CutPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		a := assets[name]
		if a == nil {
			notFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}

// notFound answers in the API's error shape.
func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(wire.Error{Error: "no dashboard file " + r.URL.Path, Code: wire.CodeNotFound})
}
