package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// writeJSON writes v with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads a whole request body of at most limit bytes (413 beyond).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &badRequest{reason: fmt.Sprintf("request body is larger than %d bytes", limit), tooBig: true}
		}
		return nil, &badRequest{reason: "reading request body: " + err.Error()}
	}
	return body, nil
}

// decodeBody reads an optional JSON body of at most limit bytes into v. An
// empty body leaves v as it is. Unknown fields are ignored.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError(err)
	}
	return nil
}

// jsonError turns a decoding error into a sentence that names the field.
func jsonError(err error) error {
	var (
		te *json.UnmarshalTypeError
		se *json.SyntaxError
	)
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return invalid(field, "must be %s, got JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return invalid("", "malformed JSON at byte %d: %v", se.Offset, se)
	}
	return invalid("", "malformed JSON: %v", err)
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int64", "uint64", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "a value of the documented type"
	}
	return "of type " + k
}
