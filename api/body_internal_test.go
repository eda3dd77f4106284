package api

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
)

// unknownMembers (the walk in place) finds what the decoder's walk finds,
// and takes plain bodies itself.
func TestUnknownMembersMatchDecoder(t *testing.T) {
	submit := reflect.TypeFor[wire.SubmitRequest]()
	for _, tc := range []struct {
		body string
		want []string
		fast bool // unknownMembers answers, not the decoder
	}{
		{`{"command":"x"}`, nil, true},
		{` { } `, nil, true},
		{`{"command":"a\"b}","priorty":1,"Queue":"q","env":{"A":"{"}}`, []string{`unknown field "priorty"`}, true},
		{"{\n\t\"backoff\": {\"bse\": \"1s\", \"max\": \"2s\"},\r\n \"x\": [1, {\"y\": []}], \"z\": null}",
			[]string{`unknown field "backoff.bse"`, `unknown field "x"`, `unknown field "z"`}, true},
		{`{"backoff":null,"resources":{"cpu_millis":1,"gpuz":2},"tags":["a","]"],"payload":{"k":[{"deep":true}]}}`,
			[]string{`unknown field "resources.gpuz"`}, true},
		{`{"run_at":"2025-01-01T00:00:00Z","max_attempts":3,"x":-1.5e3,"y":true}`, []string{`unknown field "x"`, `unknown field "y"`}, true},
		{`{"pri\u006frty":1}`, []string{`unknown field "priorty"`}, false},          // escaped key: the decoder
		{`{"QUEUEſ":1,"command":"x"}`, []string{`unknown field "QUEUEſ"`}, false},   // not ASCII: the decoder
		{`{"x":1,"x":2}`, []string{`unknown field "x"`, `unknown field "x"`}, true}, // each time, as the decoder
	} {
		var req wire.SubmitRequest
		if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		got, ok := unknownMembers([]byte(tc.body), submit, "")
		if ok != tc.fast {
			t.Errorf("%s: unknownMembers answered %v, want %v", tc.body, ok, tc.fast)
		}
		if dec := decodedUnknownFields([]byte(tc.body), submit, ""); ok && !slices.Equal(got, dec) {
			t.Errorf("%s: unknownMembers %q, the decoder %q", tc.body, got, dec)
		}
		if all := unknownFields([]byte(tc.body), submit, ""); !slices.Equal(all, tc.want) {
			t.Errorf("%s: unknownFields %q, want %q", tc.body, all, tc.want)
		}
	}
}

// FuzzUnknownMembers: wherever unknownMembers answers for a body that
// decodes, its answer is the decoder's walk's.
func FuzzUnknownMembers(f *testing.F) {
	for _, s := range []string{`{"command":"x","priorty":1}`, `{"backoff":{"bse":"1s"}}`, `{"a":"\"}","b":[{},[]]}`, `{}`, `[]`, `{"Queue" : "q" , "x":null}`} {
		f.Add([]byte(s))
	}
	submit := reflect.TypeFor[wire.SubmitRequest]()
	f.Fuzz(func(t *testing.T, body []byte) {
		var req wire.SubmitRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		got, ok := unknownMembers(body, submit, "")
		if dec := decodedUnknownFields(body, submit, ""); ok && !slices.Equal(got, dec) {
			t.Errorf("%q: unknownMembers %q, the decoder %q", body, got, dec)
		}
	})
}

// isName accepts exactly what the name pattern it replaced accepted.
func TestIsNameMatchesPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	names := []string{"", "a", "default", "Q-1.x:y_z", "a b", "a/b", "é", "queue\n", "a\x00", "ä1", "-", strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("é", 64)}
	for c := 0; c < 256; c++ {
		names = append(names, string(rune(c)), "x"+string([]byte{byte(c)}))
	}
	for _, n := range names {
		if got, want := isName(n), pattern.MatchString(n); got != want {
			t.Errorf("isName(%q) = %v, the pattern says %v", n, got, want)
		}
	}
}
