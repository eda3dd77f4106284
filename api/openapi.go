package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the API's contract as an OpenAPI 3.1 document, served
// by every node at GET /openapi.json. It is generated from the routes table
// of openapi_gen_test.go and the JSON shapes of package wire: after changing
// either, run `go test ./api -run TestOpenAPIDocument -update`. Tests check
// that it lists exactly the routes the server registers and that the API
// tests' requests and replies validate against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// handleOpenAPI serves GET /openapi.json, without a token: the contract is
// no secret.
func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDocument)
}
