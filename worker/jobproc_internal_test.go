package worker

import (
	"errors"
	"slices"
	"testing"
)

func TestLookupRunAsNeedsRoot(t *testing.T) {
	if _, err := lookupRunAs("nobody", 1000); !errors.Is(err, errRunAsNeedsRoot) {
		t.Fatalf("lookupRunAs as uid 1000 = %v, want errRunAsNeedsRoot", err)
	}
	if id, err := lookupRunAs("", 1000); id != nil || err != nil {
		t.Fatalf("lookupRunAs(\"\") = %v, %v, want nothing", id, err)
	}
}

func TestSplitCommand(t *testing.T) {
	ok := []struct {
		command string
		want    []string
	}{
		{"make", []string{"make"}},
		{"  make  -j4\tall ", []string{"make", "-j4", "all"}},
		{`make CFLAGS='-O2 -g' "NAME=a b"`, []string{"make", "CFLAGS=-O2 -g", "NAME=a b"}},
		{`echo '' ""`, []string{"echo", "", ""}},
		{`echo 'a;b|c$d'`, []string{"echo", "a;b|c$d"}},
		{`echo "it's"`, []string{"echo", "it's"}},
		{"rsync -a src/ host:dst/ --exclude=x.tmp,y@z", []string{"rsync", "-a", "src/", "host:dst/", "--exclude=x.tmp,y@z"}},
	}
	for _, tc := range ok {
		got, err := splitCommand(tc.command)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitCommand(%q) = %q, %v, want %q", tc.command, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"", "   ", "a; b", "a && b", "a | b", "a > f", "a < f", "a $(b)", "a `b`", "a $HOME",
		`a \; b`, "a *.go", "a ?", "a [x]", "a # c", "a ~/x", "a {b,c}", "! a", "a\nb", "a (b)",
		`a "$HOME"`, "a \"`b`\"", `a "b\"c"`, `a 'b`, `a "b`,
	} {
		if got, err := splitCommand(bad); !errors.Is(err, errNotAllowed) {
			t.Errorf("splitCommand(%q) = %q, %v, want errNotAllowed", bad, got, err)
		}
	}
}
