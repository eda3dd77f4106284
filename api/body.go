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
// A body leaderRoute already read (callBody) is returned without a copy.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if cb, ok := r.Body.(*callBody); ok && cb.Len() == len(cb.body) && int64(len(cb.body)) <= limit {
		_, _ = cb.Seek(0, io.SeekEnd) // read, as io.ReadAll would leave it
		return cb.body, nil
	}
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
	if out, ok := unknownMembers(data, t, prefix); ok {
		return out
	}
	return decodedUnknownFields(data, t, prefix)
}

// decodedUnknownFields is unknownFields of an object for struct type t,
// walked with a decoder.
func decodedUnknownFields(data []byte, t reflect.Type, prefix string) []string {
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

// unknownMembers is unknownFields of an object for struct type t without
// a decoder: it walks data's members in place, and allocates only for
// what it reports and the members it looks into. ok is false when it
// cannot tell (data is not an object, or a key is escaped or not plain
// ASCII): then the decoder's walk answers.
func unknownMembers(data []byte, t reflect.Type, prefix string) (out []string, ok bool) {
	fields := jsonFieldsOf(t)
	ok = eachMember(data, func(key, val []byte) bool {
		var lower [64]byte
		k, fits := asciiLower(key, lower[:0])
		if !fits {
			return false
		}
		f, known := fields[string(k)]
		switch {
		case !known:
			out = append(out, fmt.Sprintf("unknown field %q", prefix+string(key)))
		case mayHaveFields(f.Type) && string(val) != "null":
			out = append(out, unknownFields(val, f.Type, prefix+string(key)+".")...)
		}
		return true
	})
	return out, ok
}

// asciiLower appends key lower-cased to buf; false if key is not plain
// printable ASCII, whose case folding strings.ToLower and encoding/json
// agree on.
func asciiLower(key, buf []byte) ([]byte, bool) {
	for _, c := range key {
		switch {
		case c < 0x20 || c >= 0x7f:
			return nil, false
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf, true
}

// mayHaveFields reports whether a value of type t may hold objects whose
// fields unknownFields checks: a struct, or a slice or array of them.
func mayHaveFields(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Array:
		return mayHaveFields(t.Elem())
	}
	return false
}

// eachMember calls fn with the raw key (between its quotes) and the raw
// value of each member of the JSON object data, in order, until fn
// returns false. data is valid JSON (it decoded without error). It
// reports false when data is not an object, a key holds an escape, or fn
// returned false.
func eachMember(data []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		return true
	}
	for i < len(data) && data[i] == '"' {
		end := i + 1
		for end < len(data) && data[end] != '"' && data[end] != '\\' {
			end++
		}
		if end >= len(data) || data[end] != '"' {
			return false // an escaped key: the decoder unquotes it
		}
		key := data[i+1 : end]
		if i = skipSpace(data, end+1); i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		vend := skipValue(data, i)
		if vend <= i || !fn(key, data[i:vend]) {
			return false
		}
		switch i = skipSpace(data, vend); {
		case i < len(data) && data[i] == '}':
			return true
		case i < len(data) && data[i] == ',':
			i = skipSpace(data, i+1)
		default:
			return false
		}
	}
	return false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value starting at i.
func skipValue(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing object
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
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
