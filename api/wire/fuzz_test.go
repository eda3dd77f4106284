package wire

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseDuration: a duration is accepted exactly when time.ParseDuration
// takes it and it is neither negative nor over MaxDuration; the error names
// the field.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "5m", "1h30m", "0", "", "-5s", "1 day", "9223372036854775807ns",
		"9223372036854775808ns", "2562047h47m16.854775807s", "1e3s", ".5s", "1.s", "+3s", "-0", "1µs", "1us", "\x00",
		"876000h", "876000h1ns", "2500000h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration("timeout", s)
		want, werr := time.ParseDuration(s)
		switch {
		case err != nil:
			if !strings.HasPrefix(err.Error(), "timeout: ") {
				t.Fatalf("ParseDuration(%q) error %q does not name the field", s, err)
			}
			if werr == nil && want >= 0 && want <= MaxDuration {
				t.Fatalf("ParseDuration(%q) refused %s: %v", s, want, err)
			}
		case werr != nil || d != want || d < 0 || d > MaxDuration:
			t.Fatalf("ParseDuration(%q) = %s, time.ParseDuration says %s, %v", s, d, want, werr)
		}
	})
}
