package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
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
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge(limit)
		case errors.Is(err, errBusy):
			return nil, errBusy
		}
		return nil, &badRequest{reason: "reading request body: " + err.Error()}
	}
	return body, nil
}

// decodeBody reads an optional JSON body of at most limit bytes into v. An
// empty body leaves v as it is. Unknown fields are ignored. The body is
// held to its bounds (checkBody) before it is decoded.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return decodeJSON(body, v, 0)
}

// decodeJSON decodes a body into v once checkBody found it within bounds
// (batchJobs: Config.MaxBatchJobs, for a batch); an empty body leaves v
// as it is.
func decodeJSON(body []byte, v any, batchJobs int) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := checkBody(body, reflect.TypeOf(v), batchJobs); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError(err)
	}
	return nil
}

// decodeBodyWarn is decodeBody for the bodies users write by hand (jobs,
// schedules): unknown fields are still accepted, so that older
// and newer clients keep working, but each one is named in the returned
// warnings, which the reply carries (`unknown field "priorty"`,
// `unknown field "jobs[1].priorty"`).
func decodeBodyWarn(w http.ResponseWriter, r *http.Request, limit int64, v any) ([]string, error) {
	return decodeBatchBody(w, r, limit, 0, v)
}

// decodeBatchBody is decodeBodyWarn for POST /jobs/batch: the batch holds
// at most maxJobs jobs, counted before they are decoded.
func decodeBatchBody(w http.ResponseWriter, r *http.Request, limit int64, maxJobs int, v any) ([]string, error) {
	body, err := readBody(w, r, limit)
	if err != nil {
		return nil, err
	}
	if err := decodeJSON(body, v, maxJobs); err != nil || len(bytes.TrimSpace(body)) == 0 {
		return nil, err
	}
	return unknownFields(body, reflect.TypeOf(v), ""), nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// unknownFields lists, as warnings, the object keys in data that
// encoding/json would ignore when decoding into t, in the order they come,
// looking into nested objects and arrays of objects. data has already
// decoded into t without error, so it is valid JSON: one pass over its
// bytes finds the keys, and a path is formatted only for a warning (a
// batch of 1,000 jobs used to cost a json.Decoder per object and a
// formatted prefix per job, more than decoding the batch itself).
// At most maxWarnings are named; one more line counts the rest.
func unknownFields(data []byte, t reflect.Type, prefix string) []string {
	w := fieldWalker{data: data, path: append([]byte(nil), prefix...)}
	w.value(t)
	if w.more > 0 {
		w.out = append(w.out, fmt.Sprintf("and %d more unknown fields", w.more))
	}
	return w.out
}

// maxWarnings bounds the unknown fields a reply names.
const maxWarnings = 100

// fieldWalker walks valid JSON against a Go type. path is the prefix of
// the value being walked ("jobs[3]."), grown and cut back as it descends.
type fieldWalker struct {
	data []byte
	pos  int
	path []byte
	out  []string
	more int // unknown fields past maxWarnings
}

// value walks the value at pos as encoding/json would decode it into t,
// and leaves pos after it.
func (w *fieldWalker) value(t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	w.space()
	if w.pos >= len(w.data) {
		return
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		w.skip()
		return
	}
	switch {
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && w.data[w.pos] == '[':
		w.array(t.Elem())
	case t.Kind() == reflect.Struct && w.data[w.pos] == '{':
		w.object(t)
	default:
		w.skip()
	}
}

// array walks the array at pos, each item as an elem, under "path[i].".
func (w *fieldWalker) array(elem reflect.Type) {
	w.pos++ // '['
	n := len(w.path)
	base := n
	if base > 0 && w.path[base-1] == '.' {
		base--
	}
	for i := 0; ; i++ {
		w.space()
		if w.data[w.pos] == ']' {
			w.pos++
			break
		}
		if i > 0 {
			w.pos++ // ','
		}
		w.path = append(strconv.AppendInt(append(w.path[:base], '['), int64(i), 10), "]."...)
		w.value(elem)
	}
	if base < n {
		w.path = append(w.path[:base], '.')
	}
	w.path = w.path[:n]
}

// object walks the object at pos against struct type t: a key no field
// takes is a warning, a field's value is walked under "path.key.".
func (w *fieldWalker) object(t reflect.Type) {
	w.pos++ // '{'
	n := len(w.path)
	fields := jsonFieldsOf(t)
	for first := true; ; first = false {
		w.space()
		if w.data[w.pos] == '}' {
			w.pos++
			return
		}
		if !first {
			w.pos++ // ','
			w.space()
		}
		raw, plain := w.key()
		w.space()
		w.pos++ // ':'
		var (
			f  reflect.StructField
			ok bool
		)
		if plain {
			f, ok = fields[string(raw)] // no copy: the key is in lower case already
		} else {
			raw = []byte(keyString(raw))
			f, ok = fields[strings.ToLower(string(raw))]
		}
		if !ok {
			if len(w.out) < maxWarnings {
				w.out = append(w.out, fmt.Sprintf("unknown field %q", string(w.path)+string(raw)))
			} else {
				w.more++
			}
			w.space()
			w.skip()
			continue
		}
		w.path = append(append(w.path, raw...), '.')
		w.value(f.Type)
		w.path = w.path[:n]
	}
}

// key reads the object key at pos, its quotes included. plain says it is
// the key's text as it stands: printable ASCII in lower case, no escapes.
func (w *fieldWalker) key() (raw []byte, plain bool) {
	start := w.pos
	plain = true
	for w.pos++; w.data[w.pos] != '"'; w.pos++ {
		switch c := w.data[w.pos]; {
		case c == '\\':
			plain = false
			w.pos++
		case c >= utf8.RuneSelf, 'A' <= c && c <= 'Z':
			plain = false
		}
	}
	w.pos++
	if plain {
		return w.data[start+1 : w.pos-1], true
	}
	return w.data[start:w.pos], false
}

// keyString decodes a quoted JSON string as encoding/json does: escapes
// resolved, invalid UTF-8 as U+FFFD.
func keyString(quoted []byte) string {
	var s string
	_ = json.Unmarshal(quoted, &s)
	return s
}

// space moves pos past JSON whitespace.
func (w *fieldWalker) space() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// skip moves pos past the value at pos: a string, or anything up to the
// delimiter that ends it at its depth.
func (w *fieldWalker) skip() {
	depth := 0
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case '"':
			for w.pos++; w.data[w.pos] != '"'; w.pos++ {
				if w.data[w.pos] == '\\' {
					w.pos++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return
			}
			depth--
		case ',':
			if depth == 0 {
				return
			}
		}
		w.pos++
		if depth == 0 && w.pos < len(w.data) {
			if c := w.data[w.pos-1]; c == '"' || c == '}' || c == ']' {
				return
			}
		}
	}
}

// jsonFields caches, per struct type, its JSON fields by lower-cased name:
// every submit of a batch asks for them, and walking a type's fields each
// time cost a quarter of a batch submit.
var jsonFields sync.Map // reflect.Type -> map[string]reflect.StructField

// jsonName is the name encoding/json gives struct field f, and false for a
// field it neither reads nor writes (unexported, embedded, or tagged "-").
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() || f.Anonymous {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return name, true
}

func jsonFieldsOf(t reflect.Type) map[string]reflect.StructField {
	if m, ok := jsonFields.Load(t); ok {
		return m.(map[string]reflect.StructField)
	}
	m := make(map[string]reflect.StructField)
	for _, f := range reflect.VisibleFields(t) {
		name, ok := jsonName(f)
		if !ok {
			continue
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
