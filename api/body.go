package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
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

// decodeBodyWarn is decodeBody for the bodies users write by hand (jobs,
// batches, schedules): unknown fields are still accepted, so that older
// and newer clients keep working, but each one is named in the returned
// warnings, which the reply carries (`unknown field "priorty"`,
// `unknown field "jobs[1].priorty"`).
func decodeBodyWarn(w http.ResponseWriter, r *http.Request, limit int64, v any) ([]string, error) {
	body, err := readBody(w, r, limit)
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, jsonError(err)
	}
	return unknownFields(body, reflect.TypeOf(v), ""), nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// unknownFields lists, as warnings, the object keys in data that
// encoding/json would ignore when decoding into t, in the order they come,
// looking into nested objects and arrays of objects. data has already
// decoded into t without error.
func unknownFields(data []byte, t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		var out []string
		for i, item := range items {
			out = append(out, unknownFields(item, t.Elem(), fmt.Sprintf("%s[%d]", strings.TrimSuffix(prefix, "."), i)+".")...)
		}
		return out
	case reflect.Struct:
	default:
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if dec.Decode(&val) != nil {
			return out
		}
		f, ok := jsonField(t, key)
		if !ok {
			out = append(out, fmt.Sprintf("unknown field %q", prefix+key))
			continue
		}
		out = append(out, unknownFields(val, f.Type, prefix+key+".")...)
	}
	return out
}

// jsonField finds the field of struct type t that encoding/json fills from
// key: by its tag's name, else its Go name, case-insensitively.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	f, ok := jsonFieldsOf(t)[strings.ToLower(key)]
	return f, ok
}

// jsonFields caches, per struct type, its JSON fields by lower-cased name:
// every submit of a batch asks for them, and walking a type's fields each
// time cost a quarter of a batch submit.
var jsonFields sync.Map // reflect.Type -> map[string]reflect.StructField

func jsonFieldsOf(t reflect.Type) map[string]reflect.StructField {
	if m, ok := jsonFields.Load(t); ok {
		return m.(map[string]reflect.StructField)
	}
	m := make(map[string]reflect.StructField)
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[strings.ToLower(name)]; !dup {
			m[strings.ToLower(name)] = f
		}
	}
	jsonFields.Store(t, m)
	return m
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
