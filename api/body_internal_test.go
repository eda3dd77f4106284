package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
)

// unknownFieldsByDecoder is how unknownFields found the keys before it
// walked the bytes itself: a json.Decoder per object, a formatted prefix per
// item. The tests below hold the walker to the same warnings.
func unknownFieldsByDecoder(data []byte, t reflect.Type, prefix string) []string {
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
			out = append(out, unknownFieldsByDecoder(item, t.Elem(), fmt.Sprintf("%s[%d]", strings.TrimSuffix(prefix, "."), i)+".")...)
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
		f, ok := jsonFieldsOf(t)[strings.ToLower(key)]
		if !ok {
			out = append(out, fmt.Sprintf("unknown field %q", prefix+key))
			continue
		}
		out = append(out, unknownFieldsByDecoder(val, f.Type, prefix+key+".")...)
	}
	return out
}

// unknownFieldsBodies are bodies that decode into a batch, a submit or a
// schedule: unknown keys at each depth, keys in other cases, escaped keys
// and strings, invalid UTF-8, nulls, nested arrays, whitespace everywhere.
var unknownFieldsBodies = []string{
	`{}`,
	`{"jobs":[]}`,
	`{"jobs":null}`,
	`{"jobs":[{"command":"x"},{"command":"y","priorty":2}],"extra":{"a":[1,{"b":2}]}}`,
	` { "jobs" : [ { "Command" : "x" , "QUEUE":"q", "Env" : { "A" : "1" } , "backoff" : { "bse" : "1s" , "Max":"2s"} } , null ] , "x" : "}]\"," } `,
	`{"jobs":[{"command":"x","payload":{"unknown":[{"deep":1}]},"run_at":"2026-01-02T03:04:05Z","metadata":{"k":"v"}}]}`,
	`{"jobs":[{"c\u006fmmand":"x","\u00e9t\u00e9":1,"dependson":["$0"],"tags":["a","b"],"resources":{"cpu":1,"gpus":2,"mem":3}}]}`,
	"{\"jobs\":[{\"command\":\"x\",\"k\xff\":1,\"\xc3\xa9\":2}]}",
	`{"jobs":[{"command":"a\\\"b","backoff":null,"max_attempts":3,"max_retries":null,"jitter":1e3}],"jobs":[{"priorty":-1.5e-2}]}`,
	`{"command":"x","priorty":1,"backoff":{"bse":"1s"},"gnag":2,"env":{"Z":"z"}}`,
	`{"name":"n","cron":"@hourly","overlp":"skip","job":{"command":"x","priorty":1,"backoff":{"jitter":0.1,"nope":true}}}`,
}

func TestUnknownFieldsWalkerMatchesDecoder(t *testing.T) {
	types := []reflect.Type{
		reflect.TypeFor[*wire.BatchSubmitRequest](),
		reflect.TypeFor[*wire.SubmitRequest](),
		reflect.TypeFor[wire.ScheduleRequest](),
	}
	checked := 0
	for _, body := range unknownFieldsBodies {
		for _, typ := range types {
			if json.Unmarshal([]byte(body), reflect.New(typ).Interface()) != nil {
				continue // unknownFields is only asked about bodies that decoded
			}
			checked++
			for _, prefix := range []string{"", "job."} {
				got := unknownFields([]byte(body), typ, prefix)
				want := unknownFieldsByDecoder([]byte(body), typ, prefix)
				if !slices.Equal(got, want) {
					t.Errorf("%s into %v, prefix %q: walker %q, decoder %q", body, typ, prefix, got, want)
				}
			}
		}
	}
	if checked < len(unknownFieldsBodies) {
		t.Fatalf("only %d body/type pairs decoded: the corpus does not test the walker", checked)
	}
	// The corpus does warn: the comparison is not of two empty lists.
	if got := unknownFields([]byte(unknownFieldsBodies[4]), types[0], ""); !slices.Equal(got, []string{`unknown field "jobs[0].backoff.bse"`, `unknown field "x"`}) {
		t.Errorf("warnings %q", got)
	}
}

// TestUnknownFieldsWalkerMatchesDecoderOnRandomBatches builds batches of
// random known and unknown keys, values and spacing and compares.
func TestUnknownFieldsWalkerMatchesDecoderOnRandomBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"command", "Command", "queue", "priority", "priorty", "env", "metadata", "backoff", "tags",
		"depends_on", "dependsOn", "x", `\u0071ueue`, "é", "payload", "run_at", "resources", "max_attempts"}
	values := []string{`"s"`, `"a\"]},{"`, `1`, `-2.5e3`, `true`, `null`, `[]`, `{}`, `["a","b"]`,
		`{"base":"1s","bse":"2s","jitter":0.2}`, `{"A":"1","b":"2"}`, `{"cpu":1,"gpu":2}`, `[{"x":1},[2,{"y":3}]]`}
	sp := func() string { return []string{"", " ", "\n\t", "  \r\n"}[rng.IntN(4)] }
	warned := 0
	for range 2000 {
		var b strings.Builder
		b.WriteString(sp() + `{` + sp() + `"jobs"` + sp() + `:` + sp() + `[`)
		for j := range rng.IntN(4) {
			if j > 0 {
				b.WriteString(sp() + `,` + sp())
			}
			b.WriteString(`{`)
			for k := range rng.IntN(5) {
				if k > 0 {
					b.WriteString(`,`)
				}
				b.WriteString(sp() + `"` + keys[rng.IntN(len(keys))] + `"` + sp() + `:` + sp() + values[rng.IntN(len(values))] + sp())
			}
			b.WriteString(`}`)
		}
		b.WriteString(`]` + sp() + `}` + sp())
		body := []byte(b.String())
		typ := reflect.TypeFor[*wire.BatchSubmitRequest]()
		if json.Unmarshal(body, reflect.New(typ.Elem()).Interface()) != nil {
			continue
		}
		got, want := unknownFields(body, typ, ""), unknownFieldsByDecoder(body, typ, "")
		if !slices.Equal(got, want) {
			t.Fatalf("%s: walker %q, decoder %q", body, got, want)
		}
		if len(want) > 0 {
			warned++
		}
	}
	if warned == 0 {
		t.Fatal("no random batch had an unknown field")
	}
}

func FuzzUnknownFields(f *testing.F) {
	for _, body := range unknownFieldsBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, typ := range []reflect.Type{reflect.TypeFor[*wire.BatchSubmitRequest](), reflect.TypeFor[wire.ScheduleRequest]()} {
			if json.Unmarshal(body, reflect.New(typ).Interface()) != nil {
				continue
			}
			if got, want := unknownFields(body, typ, ""), unknownFieldsByDecoder(body, typ, ""); !slices.Equal(got, want) {
				t.Fatalf("%q into %v: walker %q, decoder %q", body, typ, got, want)
			}
		}
	})
}

func BenchmarkUnknownFieldsBatch(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"jobs":[`)
	for i := range 1000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"command":"echo %d","queue":"q","priority":1,"env":{"A":"1","B":"2"},"metadata":{"m":"x","n":"y"}}`, i)
	}
	buf.WriteString(`]}`)
	typ := reflect.TypeFor[*wire.BatchSubmitRequest]()
	b.ReportAllocs()
	for b.Loop() {
		if w := unknownFields(buf.Bytes(), typ, ""); len(w) != 0 {
			b.Fatal(w)
		}
	}
}
