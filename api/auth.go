package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/workron/workron/api/wire"
)

// Role is what a bearer token may do. A token holds one or more roles;
// RoleAdmin implies the others.
type Role string

// The roles. Which routes each one opens is routeRoles.
const (
	// RoleAdmin may do everything, including cluster membership, queue
	// pause/resume and backups. Nodes use the first admin token of their
	// token file for their own calls to peers (joining, health probes).
	RoleAdmin Role = "admin"
	// RoleClient may submit, read, cancel and retry jobs, and manage
	// schedules.
	RoleClient Role = "client"
	// RoleWorker may register, claim, heartbeat and report.
	RoleWorker Role = "worker"
)

// MinTokenBytes is the shortest token a token file may hold.
const MinTokenBytes = 16

// routeOpen marks a route served without a token.
const routeOpen Role = ""

// routeAny marks a route open to any valid token, whatever its roles.
const routeAny Role = "any"

// routeRoles is the role each route (as registered with the ServeMux)
// requires. A route missing from this table requires RoleAdmin: a new
// route is closed until someone decides who may call it. The pprof routes
// exist only with Config.Pprof.
var routeRoles = map[string]Role{
	"POST /jobs":                     RoleClient,
	"POST /jobs/batch":               RoleClient,
	"GET /jobs":                      RoleClient,
	"GET /jobs/count":                RoleClient,
	"GET /stats/series":              RoleClient,
	"GET /jobs/{id}":                 RoleClient,
	"POST /jobs/{id}/cancel":         RoleClient,
	"POST /jobs/{id}/retry":          RoleClient,
	"GET /workers":                   RoleClient,
	"GET /queues":                    RoleClient,
	"GET /queues/{name}":             RoleClient,
	"GET /cluster":                   RoleClient,
	"GET /gangs/{id}":                RoleClient,
	"POST /bulk":                     RoleClient,
	"GET /bulk":                      RoleClient,
	"GET /bulk/{id}":                 RoleClient,
	"POST /bulk/{id}/stop":           RoleClient,
	"POST /schedules":                RoleClient,
	"GET /schedules":                 RoleClient,
	"GET /schedules/{name}":          RoleClient,
	"PUT /schedules/{name}":          RoleClient,
	"DELETE /schedules/{name}":       RoleClient,
	"POST /schedules/{name}/pause":   RoleClient,
	"POST /schedules/{name}/resume":  RoleClient,
	"POST /schedules/{name}/trigger": RoleClient,
	"GET /jobs/next":                 RoleWorker,
	"POST /jobs/claim":               RoleWorker,
	"GET /jobs/{id}/parent_results":  RoleWorker,
	"POST /jobs/reports":             RoleWorker,
	"POST /jobs/{id}/heartbeat":      RoleWorker,
	"POST /jobs/{id}/done":           RoleWorker,
	"POST /jobs/{id}/fail":           RoleWorker,
	"POST /jobs/{id}/checkpoint":     RoleWorker,
	"POST /jobs/{id}/preempted":      RoleWorker,
	"POST /workers/register":         RoleWorker,
	"POST /workers/{id}/heartbeat":   RoleWorker,
	"POST /workers/{id}/actions":     RoleWorker,
	"POST /queues/{name}/pause":      RoleAdmin,
	"DELETE /workers/{id}":           RoleAdmin,
	"POST /queues/{name}/resume":     RoleAdmin,
	"PUT /queues/{name}":             RoleAdmin,
	"DELETE /queues/{name}/pauses":   RoleAdmin,
	"GET /pauses":                    RoleClient,
	"GET /cluster/read_index":        routeAny, // a number; asked by the node serving a read, with its client's token
	"POST /cluster/join":             RoleAdmin,
	"DELETE /cluster/nodes/{id}":     RoleAdmin,
	"GET /backup":                    RoleAdmin,
	"POST /restore":                  RoleAdmin,
	"GET /debug/digest":              RoleAdmin,
	"GET /debug/pprof/":              RoleAdmin,
	"POST /debug/pprof/symbol":       RoleAdmin,
	"GET /metrics":                   routeAny, // or open: Config.MetricsOpen
	"GET /health":                    routeOpen,
	"GET /openapi.json":              routeOpen, // the API's contract
	"GET /ui":                        routeOpen, // static files; the page sends the token
	"GET /ui/":                       routeOpen,
	"GET /{$}":                       routeOpen,
	"/":                              routeOpen, // the JSON 404 for unknown routes
}

// Tokens are the bearer tokens a node accepts, each with its roles, as
// read from a token file by ParseTokens. Only SHA-256 digests of the
// tokens are kept, except the node's own credential. Printing a Tokens
// shows no token.
// A Tokens can be swapped for a newer file's while the node serves (Swap):
// requests check whichever set is current when they arrive.
type Tokens struct {
	set atomic.Pointer[tokenSet]
}

type tokenSet struct {
	list []tokenEntry
	node string // the first admin token: this node's credential with peers
}

// Swap makes n's tokens the ones t accepts, for requests from now on (a
// token file reloaded on SIGHUP). n itself is left as it is.
func (t *Tokens) Swap(n *Tokens) {
	t.set.Store(n.set.Load())
}

type tokenEntry struct {
	sum   [sha256.Size]byte
	roles map[Role]bool
	name  string
}

// LoadTokens reads a token file; see ParseTokens.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, nil
}

// ParseTokens reads a token file: one token per line as
//
//	ROLE[,ROLE...] TOKEN [NAME]
//
// where ROLE is admin, client or worker, TOKEN is at least MinTokenBytes
// printable characters without spaces, and NAME, optional, names the token
// in logs (it defaults to "line N"). Blank lines and lines starting with
// '#' are skipped. Errors name the line, never the token. A file without an
// admin token is valid, but its node has no credential for its peers, so
// joining a cluster through the API fails.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &tokenSet{}
	seen := make(map[[sha256.Size]byte]int)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, tok, err := parseTokenLine(line, n)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[e.sum]; dup {
			return nil, fmt.Errorf("line %d: the same token as line %d", n, first)
		}
		seen[e.sum] = n
		if e.roles[RoleAdmin] && t.node == "" {
			t.node = tok
		}
		t.list = append(t.list, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.list) == 0 {
		return nil, errors.New("no tokens: give at least one line ROLE TOKEN")
	}
	out := &Tokens{}
	out.set.Store(t)
	return out, nil
}

func parseTokenLine(line string, n int) (tokenEntry, string, error) {
	fields := strings.Fields(line)
	if len(fields) < 2 || len(fields) > 3 {
		return tokenEntry{}, "", fmt.Errorf("line %d: want ROLE[,ROLE] TOKEN [NAME], got %d fields", n, len(fields))
	}
	e := tokenEntry{roles: make(map[Role]bool), name: fmt.Sprintf("line %d", n)}
	for _, r := range strings.Split(fields[0], ",") {
		switch role := Role(r); role {
		case RoleAdmin, RoleClient, RoleWorker:
			e.roles[role] = true
		default:
			return tokenEntry{}, "", fmt.Errorf("line %d: role %q is not admin, client or worker", n, r)
		}
	}
	tok := fields[1]
	if len(tok) < MinTokenBytes {
		return tokenEntry{}, "", fmt.Errorf("line %d: the token is shorter than %d characters", n, MinTokenBytes)
	}
	for _, c := range tok {
		if c < 0x21 || c > 0x7e {
			return tokenEntry{}, "", fmt.Errorf("line %d: the token has a character other than printable ASCII", n)
		}
	}
	if len(fields) == 3 {
		e.name = fields[2]
	}
	e.sum = sha256.Sum256([]byte(tok))
	return e, tok, nil
}

// String hides the tokens.
func (t *Tokens) String() string {
	if t == nil {
		return "api.Tokens(none)"
	}
	return fmt.Sprintf("api.Tokens(%d tokens)", len(t.set.Load().list))
}

// GoString hides the tokens from %#v too.
func (t *Tokens) GoString() string { return t.String() }

// NodeToken is the credential this node sends to its peers: the token
// file's first admin token, or "" if it has none.
func (t *Tokens) NodeToken() string {
	if t == nil {
		return ""
	}
	return t.set.Load().node
}

// lookup finds the entry of a presented token. Every entry is compared,
// in constant time over digests of equal length, so neither the time taken
// nor an early exit tells which token, or how much of one, matched.
func (t *Tokens) lookup(tok string) (*tokenEntry, bool) {
	sum := sha256.Sum256([]byte(tok))
	list := t.set.Load().list
	found := -1
	for i := range list {
		if subtle.ConstantTimeCompare(sum[:], list[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &list[found], true
}

// routeAlsoNeeds is a second role a route requires besides its
// routeRoles entry, and why: a route that does what another role's route
// does (an invoke submits a job) needs that role too, so that no token
// gets by one route what its roles refuse it by the other.
var routeAlsoNeeds = map[string]alsoRole{}

// alsoRole is a route's second role and why it needs it.
type alsoRole struct {
	role Role
	why  string
}

// allows reports whether the entry's roles open a route that needs role.
func (e *tokenEntry) allows(role Role) bool {
	return role == routeAny || e.roles[RoleAdmin] || e.roles[role]
}

// requiredRole is what the route pattern needs; see routeRoles.
func (s *Server) requiredRole(pattern string) Role {
	if pattern == "GET /metrics" && s.cfg.MetricsOpen {
		return routeOpen
	}
	role, ok := routeRoles[pattern]
	if !ok {
		return RoleAdmin
	}
	return role
}

// withAuth checks the bearer token of every request when Config.Auth is
// set: 401 without a valid one, 403 when its roles do not open the route.
// The route is found the way the mux will find it, so the table is keyed
// by the patterns routes registers. A follower checks before forwarding
// and the leader checks again: the proxy passes the header on.
//
// With Config.JoinNeedsMemberCert, POST /cluster/join also needs a client
// certificate the TLS layer verified against the cluster's CA (403
// without), so a token alone does not let a host that is not a member
// into the Raft configuration.
func (s *Server) withAuth(next http.Handler) http.Handler {
	if s.cfg.Auth == nil && !s.cfg.JoinNeedsMemberCert {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := s.mux.Handler(r)
		if pattern == "POST /cluster/join" && s.cfg.JoinNeedsMemberCert && !verifiedPeer(r) {
			writeError(w, wire.CodeForbidden, "joining needs a member certificate: connect with a client certificate signed by the cluster's CA")
			return
		}
		need := s.requiredRole(pattern)
		if need == routeOpen || s.cfg.Auth == nil {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="workron"`)
			writeError(w, wire.CodeUnauthorized, "this node requires a token: send the header Authorization: Bearer TOKEN")
			return
		}
		e, ok := s.cfg.Auth.lookup(tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="workron", error="invalid_token"`)
			writeError(w, wire.CodeUnauthorized, "the bearer token is not one this node accepts")
			return
		}
		if !e.allows(need) {
			s.logger.Info("request refused: role", "token", e.name, "route", pattern, "needs", need, "request_id", requestID(r.Context()))
			writeError(w, wire.CodeForbidden, fmt.Sprintf("this token may not %s: that needs the %s role", pattern, need))
			return
		}
		if also, ok := routeAlsoNeeds[pattern]; ok && !e.allows(also.role) {
			s.logger.Info("request refused: role", "token", e.name, "route", pattern, "needs", also.role, "request_id", requestID(r.Context()))
			writeError(w, wire.CodeForbidden, fmt.Sprintf("this token may not %s: that needs the %s role as well as the %s role (%s)", pattern, also.role, need, also.why))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyTokenName, e.name)))
	})
}

// tokenName is the name of the token that the request was let in with,
// or "" when the node checks no tokens.
func tokenName(ctx context.Context) string {
	name, _ := ctx.Value(keyTokenName).(string)
	return name
}

// verifiedPeer reports whether the request came over TLS with a node's
// certificate: one the server verified against the cluster's CA that is
// also for server authentication, as every node's is (`workron tls node`).
// A client certificate (`workron tls client`: client authentication only)
// passes the handshake but makes no one a member.
func verifiedPeer(r *http.Request) bool {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return false
	}
	leaf := r.TLS.PeerCertificates[0]
	return len(leaf.ExtKeyUsage) == 0 || slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) ||
		slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny)
}

// bearerToken reads "Authorization: Bearer TOKEN" (the scheme in any case).
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authorize adds this node's credential to a request it sends to a peer.
func (s *Server) authorize(req *http.Request) {
	if tok := s.cfg.Auth.NodeToken(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
}
