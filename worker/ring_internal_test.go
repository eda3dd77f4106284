package worker

import (
	"strings"
	"testing"
)

func TestRing(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		writes []string
		want   string
	}{
		{"FitsWhole", 8, []string{"abc", "de"}, "abcde"},
		{"ExactlyFull", 4, []string{"ab", "cd"}, "abcd"},
		{"WrapsAround", 4, []string{"abc", "def", "g"}, "defg"},
		{"OneBigWrite", 4, []string{"abcdefgh"}, "efgh"},
		{"ManySmallWrites", 5, strings.Split("abcdefghijklmnopq", ""), "mnopq"},
		{"ZeroKeepsNothing", 0, []string{"abc"}, ""},
		{"CutRuneIsDropped", 4, []string{"aé", "bcd"}, "bcd"}, // "é" is 2 bytes: tail is "\xa9bcd"
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.size)
			for _, w := range tt.writes {
				if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := r.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}
