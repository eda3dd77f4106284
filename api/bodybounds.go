package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// Bounds a request body is held to while it is scanned, before it is
// decoded (see checkBody).
const (
	// MaxJSONDepth is the deepest nesting of arrays and objects a request
	// body may hold, payloads and results included.
	MaxJSONDepth = 100
	// MaxUnknownFields is the most keys of one object of a body that no
	// field takes: each is ignored, and named in a warning.
	MaxUnknownFields = 64
	// maxOtherItems bounds the lists and maps that fieldLimits gives no
	// limit of their own.
	maxOtherItems = 1000
)

// fromServer, as a limit's items, is the limit the caller gives
// (Config.MaxBatchJobs for the jobs of a batch).
const fromServer = -1

// limit bounds one field of a request body. Each reason is a format the
// bound fills in; the reasons are those of the checks after decoding
// (validate.go), so a client gets the same sentence whichever refuses.
type limit struct {
	items   int    // most items of a list or entries of a map; 0: maxOtherItems
	tooMany string // the reason past items: %d is items
	// total bounds the items of this field in the whole body (depends_on
	// across a batch); 0: none. One field has a total.
	total    int
	totalMsg string
	bytes    int    // longest string (decoded) or raw JSON value; 0: the body's limit
	tooLong  string // the reason past bytes: %d is bytes (and a second %d the size, with tooBig)
	tooBig   bool   // past bytes is 413 too_large, not 400
	keyBytes int    // longest map key; 0: the body's limit
	keyMsg   string // the reason past keyBytes: %.40q the key, %d keyBytes
	// elem bounds each item of a list or value of a map: a string item
	// past its bytes is named field[i], a map value field.key.
	elem *limit
}

// Reasons shared by several limits.
const (
	entriesMsg = "more than %d entries"
	keyLenMsg  = "key %.40q must be 1-%d bytes"
	longMsg    = "longer than %d bytes"
)

// mapOfStrings is the limit of a job's env and metadata (checkMap).
var mapOfStrings = limit{items: MaxMapEntries, tooMany: entriesMsg, keyBytes: MaxMapKeyBytes, keyMsg: keyLenMsg,
	elem: &limit{bytes: MaxMapValueBytes, tooLong: longMsg}}

// resultLimit is the limit of a report's result (reportResult).
var resultLimit = limit{bytes: wire.MaxResultBytes, tooLong: "a result is at most %d bytes of JSON, got %d", tooBig: true}

// fieldLimits are the limits of the request bodies' fields, by the Go type
// that holds them and the field's JSON name. A list or map not named here
// holds at most maxOtherItems.
var fieldLimits = map[reflect.Type]map[string]limit{
	reflect.TypeFor[wire.SubmitRequest](): {
		"command":         {bytes: MaxCommandBytes, tooLong: longMsg},
		"payload":         {bytes: MaxPayloadBytes, tooLong: "larger than %d bytes"},
		"env":             mapOfStrings,
		"metadata":        mapOfStrings,
		"depends_on":      {items: MaxDependencies, tooMany: "more than %d dependencies", total: MaxBatchDependencies, totalMsg: "the batch's jobs have more than %d dependencies in all"},
		"tags":            {items: MaxTags, tooMany: "more than %d tags", elem: &limit{bytes: MaxTagBytes, tooLong: "must be 1-%d bytes"}},
		"idempotency_key": {bytes: MaxKeyBytes, tooLong: longMsg},
		"concurrency_key": {bytes: wire.MaxConcurrencyKeyBytes, tooLong: longMsg},
	},
	reflect.TypeFor[wire.BatchSubmitRequest](): {
		"jobs": {items: fromServer, tooMany: "at most %d jobs per batch, got more"},
	},
	reflect.TypeFor[wire.ClaimRequest](): {
		"worker_id": {bytes: MaxKeyBytes, tooLong: longMsg},
		"queues":    {items: MaxQueues, tooMany: "more than %d queues"},
		"types":     {items: MaxTypes, tooMany: "more than %d types"},
		"reports":   {items: wire.MaxBatchReports, tooMany: "must hold 1 to %d reports, got more"},
	},
	reflect.TypeFor[wire.BatchReportRequest](): {
		"reports": {items: wire.MaxBatchReports, tooMany: "must hold 1 to %d reports, got more"},
	},
	reflect.TypeFor[wire.BatchReport](): {
		"result": resultLimit,
	},
	reflect.TypeFor[wire.ReportRequest](): {
		"result": resultLimit,
	},
	reflect.TypeFor[wire.Worker](): {
		"id":     {bytes: MaxKeyBytes, tooLong: longMsg},
		"tags":   {items: MaxMapEntries, tooMany: "more than %d tags"},
		"queues": {items: MaxQueues, tooMany: "more than %d queues"},
	},
	reflect.TypeFor[wire.WorkerHeartbeatRequest](): {
		"jobs": {items: MaxHeartbeatJobs, tooMany: "more than %d leases"},
	},
	reflect.TypeFor[wire.WorkerActionsRequest](): {
		"known": {items: MaxHeartbeatJobs, tooMany: "more than %d leases"},
	},
	reflect.TypeFor[wire.QueueLimits](): {
		"key_weights": {items: fsm.MaxKeyWeights, tooMany: "more than %d keys"},
	},
}

// checkBody scans a request body that is to be decoded into a value of
// type t and refuses it (400 naming the field) at the first bound it
// passes: the items of a list or map, the bytes of a string, the depth
// of nesting, the unknown keys of an object. It allocates nothing for a
// body within bounds, so a body of 60,000 metadata entries costs what
// scanning 65 of them does, where decoding it first built all 60,000.
// batchJobs bounds the jobs of a batch (Config.MaxBatchJobs).
//
// A body that is not valid JSON passes, or is refused at the bound it
// had passed by then: json.Unmarshal, which runs next, names the syntax
// error. For valid JSON, checkBody refuses nothing that the checks after
// decoding would take (strings are measured as encoding/json decodes
// them), except a map given twice, whose entries it adds up.
func checkBody(data []byte, t reflect.Type, batchJobs int) error {
	s := bodyScan{data: data, batchJobs: batchJobs}
	s.value(shapeOf(t))
	return s.err
}

// shapeKind is how the scan walks a value.
type shapeKind uint8

const (
	kindAny    shapeKind = iota // skipped: a number, a bool, a time, anything unbounded
	kindString                  // a string, measured
	kindRaw                     // a json.RawMessage, measured as written
	kindList
	kindMap
	kindObject
)

// shape is what a Go type makes of a JSON value, and the limit of the
// field that holds it.
type shape struct {
	kind   shapeKind
	lim    limit
	elem   *shape       // list items, map values
	fields []fieldShape // object
	byName map[string]int
}

type fieldShape struct {
	name  []byte // the JSON name, for case-insensitive matching
	shape *shape
}

var shapes sync.Map // reflect.Type -> *shape

// shapeOf is the shape of t, built once.
func shapeOf(t reflect.Type) *shape {
	if sh, ok := shapes.Load(t); ok {
		return sh.(*shape)
	}
	sh := buildShape(t, limit{}, 0)
	shapes.Store(t, sh)
	return sh
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// buildShape makes the shape of t held by a field of limit lim.
func buildShape(t reflect.Type, lim limit, depth int) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	sh := &shape{lim: lim}
	switch {
	case depth > 16: // no request type nests so deep; a recursive one stops here
	case t == rawMessage:
		sh.kind = kindRaw
	case reflect.PointerTo(t).Implements(jsonUnmarshaler):
	case t.Kind() == reflect.String:
		sh.kind = kindString
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8: // base64
		sh.kind = kindString
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		sh.kind = kindList
		sh.elem = buildShape(t.Elem(), elemLimit(lim), depth+1)
	case t.Kind() == reflect.Map:
		sh.kind = kindMap
		sh.elem = buildShape(t.Elem(), elemLimit(lim), depth+1)
	case t.Kind() == reflect.Struct:
		sh.kind = kindObject
		sh.byName = make(map[string]int)
		lims := fieldLimits[t]
		for _, f := range reflect.VisibleFields(t) {
			name, ok := jsonName(f)
			if !ok {
				continue
			}
			if _, dup := sh.byName[name]; dup {
				continue
			}
			sh.byName[name] = len(sh.fields)
			sh.fields = append(sh.fields, fieldShape{name: []byte(name), shape: buildShape(f.Type, lims[name], depth+1)})
		}
	}
	return sh
}

func elemLimit(lim limit) limit {
	if lim.elem == nil {
		return limit{}
	}
	return *lim.elem
}

// field finds the field a key names as encoding/json does: the exact
// name first, then one equal under Unicode case folding. -1: none.
func (sh *shape) field(key []byte) int {
	if i, ok := sh.byName[string(key)]; ok {
		return i
	}
	for i := range sh.fields {
		if bytes.EqualFold(key, sh.fields[i].name) {
			return i
		}
	}
	return -1
}

// segment is one step of the path to the value being scanned: a field's
// name, a list's index, or a map's key (its quoted bytes).
type segment struct {
	name  string
	index int
	key   []byte
}

// bodyScan walks a body against a shape. It stops at the first bound
// passed (err set) or at the first byte that is not JSON (err nil).
type bodyScan struct {
	data      []byte
	pos       int
	depth     int // of the arrays and objects around pos
	batchJobs int
	total     int // items of the field with a total, so far
	path      []segment
	err       error
}

// value walks the value at pos as sh, and leaves pos after it.
func (s *bodyScan) value(sh *shape) bool {
	s.space()
	if s.pos >= len(s.data) {
		return false
	}
	switch c := s.data[s.pos]; {
	case sh.kind == kindList && c == '[':
		return s.list(sh)
	case sh.kind == kindMap && c == '{':
		_, ok := s.entries(sh, 0)
		return ok
	case sh.kind == kindObject && c == '{':
		return s.object(sh)
	case sh.kind == kindString && c == '"':
		n, _, ok := s.str()
		if ok && sh.lim.bytes > 0 && n > sh.lim.bytes {
			return s.refuse(s.field(), sh.lim.tooLong, sh.lim.bytes)
		}
		return ok
	case sh.kind == kindRaw:
		start := s.pos
		if !s.skip() {
			return false
		}
		if n := s.pos - start; sh.lim.bytes > 0 && n > sh.lim.bytes {
			if sh.lim.tooBig {
				s.err = &badRequest{field: s.field(), reason: fmt.Sprintf(sh.lim.tooLong, sh.lim.bytes, n), tooBig: true}
				return false
			}
			return s.refuse(s.field(), sh.lim.tooLong, sh.lim.bytes)
		}
		return true
	}
	return s.skip()
}

// list walks the array at pos, each item as sh.elem.
func (s *bodyScan) list(sh *shape) bool {
	most := sh.lim.items
	switch most {
	case 0:
		most = maxOtherItems
	case fromServer:
		most = cmp.Or(s.batchJobs, maxOtherItems)
	}
	if !s.enter() {
		return false
	}
	at := len(s.path)
	s.path = append(s.path, segment{index: -1})
	for n := 0; ; n++ {
		s.space()
		if s.pos >= len(s.data) {
			return false
		}
		if s.data[s.pos] == ']' {
			s.pos++
			break
		}
		if n > 0 {
			if s.data[s.pos] != ',' {
				return false
			}
			s.pos++
		}
		if n == most {
			s.path = s.path[:at]
			return s.refuse(s.field(), sh.lim.tooMany, most)
		}
		if sh.lim.total > 0 {
			if s.total++; s.total > sh.lim.total {
				s.path = s.path[:at]
				return s.refuse(s.field(), sh.lim.totalMsg, sh.lim.total)
			}
		}
		s.path[at].index = n
		if !s.value(sh.elem) {
			return false
		}
	}
	s.path = s.path[:at]
	s.depth--
	return true
}

// entries walks the object at pos as a map whose field already had seen
// entries (a key given twice adds to one map), each value as sh.elem; it
// returns the entries seen in all.
func (s *bodyScan) entries(sh *shape, seen int) (int, bool) {
	most := cmp.Or(sh.lim.items, maxOtherItems)
	if !s.enter() {
		return seen, false
	}
	at := len(s.path)
	for first := true; ; first = false {
		s.space()
		if s.pos >= len(s.data) {
			return seen, false
		}
		if s.data[s.pos] == '}' {
			s.pos++
			break
		}
		if !first {
			if s.data[s.pos] != ',' {
				return seen, false
			}
			s.pos++
			s.space()
		}
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return seen, false
		}
		start := s.pos
		n, _, ok := s.str()
		if !ok {
			return seen, false
		}
		key := s.data[start:s.pos]
		s.path = s.path[:at]
		if seen == most {
			return seen, s.refuse(s.field(), sh.lim.tooMany, most)
		}
		seen++
		if sh.lim.keyBytes > 0 && n > sh.lim.keyBytes {
			return seen, s.refuse(s.field(), sh.lim.keyMsg, keyString(key), sh.lim.keyBytes)
		}
		if !s.colon() {
			return seen, false
		}
		s.path = append(s.path, segment{index: -1, key: key})
		if !s.value(sh.elem) {
			return seen, false
		}
		s.path = s.path[:at]
	}
	s.depth--
	return seen, true
}

// maxCounted is the most fields of an object whose map entries are added
// up over keys given twice; request types have fewer.
const maxCounted = 48

// object walks the object at pos against the fields of sh.
func (s *bodyScan) object(sh *shape) bool {
	if !s.enter() {
		return false
	}
	var seen [maxCounted]int // map entries per field, over keys given twice
	unknown := 0
	for first := true; ; first = false {
		s.space()
		if s.pos >= len(s.data) {
			return false
		}
		if s.data[s.pos] == '}' {
			s.pos++
			break
		}
		if !first {
			if s.data[s.pos] != ',' {
				return false
			}
			s.pos++
			s.space()
		}
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return false
		}
		start := s.pos
		_, escaped, ok := s.str()
		if !ok {
			return false
		}
		key := s.data[start+1 : s.pos-1]
		if escaped {
			key = []byte(keyString(s.data[start:s.pos]))
		}
		if !s.colon() {
			return false
		}
		i := sh.field(key)
		if i < 0 {
			if unknown++; unknown > MaxUnknownFields {
				return s.refuse(cmp.Or(s.field(), "body"), "more than %d unknown fields", MaxUnknownFields)
			}
			if !s.skip() {
				return false
			}
			continue
		}
		f := &sh.fields[i]
		s.path = append(s.path, segment{name: string(f.name), index: -1})
		s.space()
		if f.shape.kind == kindMap && i < maxCounted && s.pos < len(s.data) && s.data[s.pos] == '{' {
			seen[i], ok = s.entries(f.shape, seen[i])
		} else {
			ok = s.value(f.shape)
		}
		if !ok {
			return false
		}
		s.path = s.path[:len(s.path)-1]
	}
	s.depth--
	return true
}
