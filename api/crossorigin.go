package api

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/workron/workron/api/wire"
)

// A web page can make a browser send requests to any address, this node on
// 127.0.0.1 included, without the page's owner seeing the answers: a form
// posts urlencoded, multipart or text/plain bodies, fetch sends those
// without asking first (no CORS preflight), an image GETs a URL. A node
// without tokens would run what they submit. withBrowserGuard refuses
// them, on every node, before authentication:
//
//   - a write (any method but GET, HEAD and OPTIONS) that a browser sent
//     from a page of another origin, by its Sec-Fetch-Site header or, from
//     older browsers, an Origin that is not this node's Host: 403
//     cross_origin (net/http's CrossOriginProtection decides). A request
//     with neither header is not a browser's and passes;
//   - the same for the GETs that change the cluster (sideEffectGETs): an
//     image cannot claim a job (browsers without Sec-Fetch-Site send no
//     Origin with an image, and are not caught there);
//   - a write whose Content-Type is one a browser sends without preflight:
//     writes take application/json, the raw-bytes routes also
//     application/octet-stream (rawBodyRoutes), and a request without a
//     Content-Type passes (v0 workers send none with their
//     body-less POSTs, and a browser that sends none sends an Origin): 415
//     unsupported_media_type;
//   - with Config.CheckHost, a Host that names this node by a name it does
//     not know (DNS rebinding: a page whose own domain resolves to
//     127.0.0.1 is same-origin to the browser): 403 host_not_allowed.
//
// The dashboard, served by the node itself, is same-origin and sends JSON.

// sideEffectGETs are the GET routes that change the cluster: the v0 worker API's
// workers claim with a GET, which must stay wire-compatible.
var sideEffectGETs = map[string]bool{"GET /jobs/next": true}

// rawBodyRoutes take a body of raw bytes (application/octet-stream)
// besides JSON.
var rawBodyRoutes = map[string]bool{
	"POST /jobs/{id}/checkpoint": true,
	"POST /restore":              true,
	"POST /debug/pprof/symbol":   true, // go tool pprof's symbol lookups
}

// browserOriginHeaders say where a browser sent a request from; a follower
// drops them from what it forwards, having checked them.
var browserOriginHeaders = []string{"Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"}

// withBrowserGuard refuses what a web page of another origin, or of a
// name this node does not serve, could make a browser send (see above).
func (s *Server) withBrowserGuard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			writeError(w, wire.CodeHostNotAllowed, "this node does not serve the host name "+quote(r.Host)+
				" (a web page on a name that resolves to this node could use it): name it in --allowed-hosts, or use 127.0.0.1 or localhost")
			return
		}
		if pattern, ok := s.crossOrigin(cop, r); ok {
			writeError(w, wire.CodeCrossOrigin, "a page of another origin had a browser send "+pattern+" (Origin "+
				quote(r.Header.Get("Origin"))+", Sec-Fetch-Site "+quote(r.Header.Get("Sec-Fetch-Site"))+"); nothing was done")
			return
		}
		if code, msg := s.checkContentType(r); code != "" {
			writeError(w, code, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin reports whether a browser sent r for a page of another
// origin and r changes the cluster, with r's route. Reads are left alone:
// the browser keeps their answers from the page.
func (s *Server) crossOrigin(cop *http.CrossOriginProtection, r *http.Request) (pattern string, refused bool) {
	switch r.Method {
	case http.MethodOptions:
		return "", false
	case http.MethodGet, http.MethodHead: // a GET route serves HEAD too
		if r.Header.Get("Sec-Fetch-Site") == "" && r.Header.Get("Origin") == "" {
			return "", false // not a browser's, or one that says nothing
		}
		if _, pattern = s.mux.Handler(r); !sideEffectGETs[pattern] {
			return "", false
		}
		// CrossOriginProtection passes every GET: ask it as for a POST.
		post := *r
		post.Method = http.MethodPost
		return pattern, cop.Check(&post) != nil
	}
	if cop.Check(r) == nil {
		return "", false
	}
	_, pattern = s.mux.Handler(r)
	return pattern, true
}

// checkContentType refuses a write whose body a browser could have sent
// without preflight: it returns the error code and sentence, or "".
func (s *Server) checkContentType(r *http.Request) (code, msg string) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return "", ""
	}
	types := r.Header.Values("Content-Type")
	if len(types) == 0 {
		return "", ""
	}
	media, _, err := mime.ParseMediaType(types[0])
	if len(types) == 1 && err == nil {
		if media == "application/json" {
			return "", ""
		}
		if media == "application/octet-stream" {
			if _, pattern := s.mux.Handler(r); rawBodyRoutes[pattern] {
				return "", ""
			}
		}
	}
	want := "application/json"
	if _, pattern := s.mux.Handler(r); rawBodyRoutes[pattern] {
		want += " or application/octet-stream"
	}
	return wire.CodeUnsupportedMediaType, r.Method + " " + r.URL.Path + " takes Content-Type: " + want + ", got " +
		quote(strings.Join(types, ", ")) + " (web pages can send that one; with curl, add -H 'Content-Type: application/json'); nothing was done"
}

// quote shows a header value in a reply, cut short.
func quote(v string) string {
	if len(v) > 100 {
		v = v[:100] + "..."
	}
	return `"` + strings.ToValidUTF8(v, "?") + `"` // a rune cut in two included
}

// newHostCheck is the set of names Config.CheckHost serves besides IP
// literals and the loopback names; nil serves every Host.
func newHostCheck(cfg Config) map[string]bool {
	if !cfg.CheckHost {
		return nil
	}
	hosts := make(map[string]bool)
	for _, h := range cfg.AllowedHosts {
		if h == "*" {
			return nil
		}
		hosts[hostName(h)] = true
	}
	if i := strings.Index(cfg.AdvertiseHTTP, "://"); i >= 0 {
		authority, _, _ := strings.Cut(cfg.AdvertiseHTTP[i+3:], "/")
		hosts[hostName(authority)] = true
	}
	return hosts
}

// hostAllowed reports whether this node serves a request for host (a Host
// header: host or host:port). An IP literal cannot be a rebound name, and
// localhost never leaves the machine; a request without a Host (HTTP/1.0)
// is not a browser's.
func (s *Server) hostAllowed(host string) bool {
	if s.hosts == nil || host == "" {
		return true
	}
	name := hostName(host)
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	return IsLoopbackHost(name) || s.hosts[name]
}

// hostName is the name of a Host header's value or of an --allowed-hosts
// entry: without port or brackets, lower case, without a final dot.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// IsLoopbackHost reports whether host (a name or an IP literal, without
// port) can only mean this machine: localhost, a name under .localhost
// (which browsers resolve to loopback themselves), or a loopback IP.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
