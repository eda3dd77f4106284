package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	vErrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/workron/workron/api/wire"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite api/openapi.json from openapi_gen_test.go")

// TestOpenAPIDocument checks that openapi.json is what the generator makes
// of the routes table and package wire, and that it is a valid OpenAPI 3.1
// document.
func TestOpenAPIDocument(t *testing.T) {
	want, err := generateOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if *updateOpenAPI {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		openAPIDocument = want
	}
	if !bytes.Equal(openAPIDocument, want) {
		t.Fatal("api/openapi.json is out of date: run go test ./api -run TestOpenAPIDocument -update")
	}
	v := contractValidator(t)
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("openapi.json: %v", e)
		}
	}
}

// TestOpenAPIRoutes checks that the document lists every route the server
// registers (read from the source of routes and the routes it calls) and
// nothing else, each with the role routeRoles gives it, and that the mux
// sends each documented path to its route.
func TestOpenAPIRoutes(t *testing.T) {
	registered := registeredPatterns(t)
	documented := map[string]bool{}
	for _, o := range apiOps {
		documented[o.pattern] = true
	}
	for p := range registered {
		if !documented[p] && notARoute[p] == "" {
			t.Errorf("route %q is registered but not in openapi.json", p)
		}
	}
	for p := range documented {
		if !registered[p] {
			t.Errorf("openapi.json lists %q, which the server does not register", p)
		}
	}
	for p := range routeRoles {
		if !documented[p] && notARoute[p] == "" {
			t.Errorf("routeRoles lists %q, which openapi.json does not", p)
		}
	}

	// The served document, as a client reads it.
	e := newSchedEnv(t, time.Unix(1_700_000_000, 0), func(c *Config) { c.Pprof = true })
	doc, err := libopenapi.NewDocument(openAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			n++
			req := httptest.NewRequest(strings.ToUpper(method), strings.NewReplacer("{id}", "x", "{name}", "x", "{file}", "app.js", "{profile}", "heap").Replace(path), nil)
			_, pattern := e.srv.mux.Handler(req)
			i := slices.IndexFunc(apiOps, func(o apiOp) bool { return operationID(o.pattern) == strings.TrimRight(op.OperationId, "23456789") })
			if i < 0 {
				t.Errorf("%s %s: operation %q is not in the routes table", method, path, op.OperationId)
				continue
			}
			o := apiOps[i]
			if pattern != o.pattern {
				t.Errorf("%s %s (%s) is routed to %q, want %q", method, path, op.OperationId, pattern, o.pattern)
			}
			role, _ := op.Extensions.Get("x-workron-role")
			want := string(e.srv.requiredRole(o.pattern))
			if want == "" {
				want = "open"
			}
			if role == nil || role.Value != want {
				t.Errorf("%s %s: x-workron-role %v, want %q", method, path, role, want)
			}
		}
	}
	if n < len(apiOps) {
		t.Errorf("the document has %d operations, want at least %d", n, len(apiOps))
	}

	rec := httptest.NewRecorder()
	authed := newSchedEnv(t, time.Unix(1_700_000_000, 0), func(c *Config) {
		tok, err := ParseTokens(strings.NewReader("client " + clientToken + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = tok
	})
	authed.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), openAPIDocument) || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET /openapi.json without a token: HTTP %d %s, want 200 and the document", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// registeredPatterns returns the patterns the package's source registers
// with mux.Handle and mux.HandleFunc (string constants, or sums of them).
func registeredPatterns(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[id.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
	}
	var eval func(ast.Expr) (string, bool)
	eval = func(x ast.Expr) (string, bool) {
		switch x := x.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		case *ast.Ident:
			s, ok := consts[x.Name]
			return s, ok
		case *ast.BinaryExpr:
			a, ok1 := eval(x.X)
			b, ok2 := eval(x.Y)
			return a + b, ok1 && ok2 && x.Op == token.ADD
		}
		return "", false
	}
	out := map[string]bool{}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			if recv, ok := sel.X.(*ast.SelectorExpr); !ok || recv.Sel.Name != "mux" {
				return true
			}
			p, ok := eval(call.Args[0])
			if !ok {
				t.Errorf("%s: a route pattern this test cannot read", fset.Position(call.Pos()))
				return true
			}
			out[p] = true
			return true
		})
	}
	if len(out) < 30 {
		t.Fatalf("found only %d routes in the source: %v", len(out), out)
	}
	return out
}

var (
	contractOnce sync.Once
	contractV    validator.Validator
	contractErr  error
	contractMu   sync.Mutex // the validator's caches are not documented as safe for concurrent use
)

// contractValidator returns a validator of openapi.json.
func contractValidator(t testing.TB) validator.Validator {
	t.Helper()
	contractOnce.Do(func() {
		doc, err := libopenapi.NewDocument(openAPIDocument)
		if err != nil {
			contractErr = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			contractErr = errs[0]
			return
		}
		contractV = v
	})
	if contractErr != nil {
		t.Fatalf("openapi.json: %v", contractErr)
	}
	return contractV
}

// CheckContract validates one exchange of an API test against openapi.json:
// the reply always (an error reply must be the error shape), the request
// when the server accepted it (a test may send a bad request on purpose).
// A request to a path the document does not have must have got 404.
func CheckContract(t testing.TB, req *http.Request, reqBody []byte, status int, header http.Header, body []byte) {
	t.Helper()
	v := contractValidator(t)
	mk := func() *http.Request {
		r := req.Clone(req.Context())
		if r.Header.Get("Content-Type") == "" && len(reqBody) > 0 {
			// A body without a type is read as JSON (v0 workers
			// and many tests send none), raw bodies (restore, checkpoint)
			// as they come; other types are refused (crossorigin.go).
			ct := "application/octet-stream"
			if b := bytes.TrimSpace(reqBody); len(b) > 0 && (b[0] == '{' || b[0] == '[') {
				ct = "application/json"
			}
			r.Header.Set("Content-Type", ct)
		}
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		r.ContentLength = int64(len(reqBody))
		r.RequestURI = ""
		return r
	}
	resp := &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)), Request: mk()}
	contractMu.Lock()
	defer contractMu.Unlock()
	var errs []*vErrors.ValidationError
	if status < 300 {
		reqBody = foldKeys(t, reqBody)
		_, errs = v.ValidateHttpRequestSync(mk())
	}
	if _, rerrs := v.ValidateHttpResponse(mk(), resp); len(rerrs) > 0 {
		errs = append(errs, rerrs...)
	}
	for _, e := range errs {
		if e.IsPathMissingError() && status == http.StatusNotFound {
			continue // an unknown route, answered 404
		}
		var details []string
		for _, se := range e.SchemaValidationErrors {
			details = append(details, se.FieldPath+": "+se.Reason)
		}
		t.Errorf("contract: %s %s → %d: %s (%s) %v\nrequest: %.300s\nreply: %.300s", req.Method, req.URL, status, e.Message, e.Reason, details, reqBody, body)
	}
	if msg := preferenceMismatch(req, status, header, body); msg != "" {
		t.Errorf("contract: %s %s → %d: %s\nreply: %.300s", req.Method, req.URL, status, msg, body)
	}
}

// preferenceMismatch says what the document cannot: a reply says
// Preference-Applied: return=minimal only to a request that preferred it,
// and the 201 of POST /jobs/batch is the jobs' ids exactly when it says so.
func preferenceMismatch(req *http.Request, status int, header http.Header, body []byte) string {
	applied := header.Get(wire.HeaderPreferenceApplied)
	if applied != "" && (applied != wire.PreferMinimal || !prefersMinimal(req.Header)) {
		return fmt.Sprintf("Preference-Applied %q to a request preferring %q", applied, req.Header.Values(wire.HeaderPrefer))
	}
	if req.Method != http.MethodPost || req.URL.Path != "/jobs/batch" || status != http.StatusCreated {
		return ""
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(body, &keys)
	if _, ids := keys["ids"]; ids != (applied != "") {
		return fmt.Sprintf("a batch reply with Preference-Applied %q is not the shape it says", applied)
	}
	return ""
}

var (
	propertyNamesOnce sync.Once
	propertyNames     map[string]string // lower case → a property name the document declares
)

// foldKeys renames the object keys of a JSON request body that name a
// property of the document only case aside ("worKer_id") to that property,
// as encoding/json matches them when the server decodes the body (docs/api.md:
// "Field names match as Go's encoding/json matches them, case aside"). A
// body that is not JSON, or has no such key, is returned as it is.
func foldKeys(t testing.TB, body []byte) []byte {
	t.Helper()
	propertyNamesOnce.Do(func() {
		var doc any
		if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
			return
		}
		propertyNames = map[string]string{}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if props, ok := v["properties"].(map[string]any); ok {
					for name := range props {
						propertyNames[strings.ToLower(name)] = name
					}
				}
				for _, c := range v {
					walk(c)
				}
			case []any:
				for _, c := range v {
					walk(c)
				}
			}
		}
		walk(doc)
	})
	var v any
	if json.Unmarshal(body, &v) != nil {
		return body
	}
	changed := false
	var fold func(v any) any
	fold = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, c := range v {
				name, ok := propertyNames[strings.ToLower(k)]
				if _, exact := v[name]; ok && name != k && !exact {
					k, changed = name, true
				}
				out[k] = fold(c)
			}
			return out
		case []any:
			for i, c := range v {
				v[i] = fold(c)
			}
		}
		return v
	}
	v = fold(v)
	if !changed {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode a request body: %v", err)
	}
	return out
}

// contractHandler wraps an API handler so that every exchange through it
// is checked by CheckContract.
func contractHandler(t testing.TB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		tw := &teeWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(tw, r)
		CheckContract(t, r, body, tw.status, w.Header(), tw.buf.Bytes())
	})
}

// teeWriter passes a reply on and keeps a copy.
type teeWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.wrote = true
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
