package api

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// pprofPrefix is where Config.Pprof mounts the Go runtime's profiles.
const pprofPrefix = "/debug/pprof/"

// pprofRoutes registers net/http/pprof's handlers on the node's own mux,
// never forwarded: a profile is of this process. They are admin-only with
// Config.Auth (routeRoles). One prefix pattern serves them all, so a new
// profile the runtime adds needs no new route.
//
// Importing net/http/pprof also registers them on http.DefaultServeMux;
// Workron never serves that mux.
func (s *Server) pprofRoutes() {
	s.mux.HandleFunc("GET "+pprofPrefix, servePprof)
	s.mux.HandleFunc("POST "+pprofPrefix+"symbol", pprof.Symbol) // go tool pprof's symbol lookups
}

// servePprof serves GET /debug/pprof/NAME: the index page for no name,
// the CPU profile, execution trace, command line and symbol table by their
// names, and any runtime/pprof profile (heap, allocs, goroutine, ...) by
// its own; an unknown name is 404.
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, pprofPrefix) {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}
