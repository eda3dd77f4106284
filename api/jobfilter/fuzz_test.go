package jobfilter_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/workron/workron/api/jobfilter"
)

// FuzzCompile: any text compiles or is refused with an *Error whose column
// lies within the text, never a panic, and a compiled filter evaluates
// every job of the table.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`status == failed and queue == "emails"`, `created_at > now-1h`, `priority<=-3`, `metadata["k"] != "v"`,
		`"k" in metadata or not (command matches "^a")`, `(((queue == a)))`, `x > `, `> 3`, "`a` == b", `id == "`,
		`all metadata as k { k == "x" }`, `created_at >= 2026-11-23T10:00:00+01:00`, `done_at < "now+1d2h"`,
	} {
		f.Add(s)
	}
	all := jobs()
	f.Fuzz(func(t *testing.T, text string) {
		flt, err := jobfilter.Compile(text, ns(now))
		if err != nil {
			var fe *jobfilter.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Compile(%q) = %v, not a *jobfilter.Error", text, err)
			}
			if fe.Column() > utf8.RuneCountInString(text)+1 || strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("Compile(%q): column %d of %d characters, error %q", text, fe.Column(), utf8.RuneCountInString(text), err)
			}
			return
		}
		for _, j := range all {
			flt.Match(j)
		}
	})
}
