package fsm

import (
	"math"
	"testing"
	"time"

	"github.com/workron/workron/store"
)

func TestBackoffDelay(t *testing.T) {
	sec := int64(time.Second)
	cases := []struct {
		name    string
		b       store.Backoff
		attempt int
		draw    float64
		want    int64
	}{
		{"FirstAttemptIsBase", store.Backoff{Base: sec, Max: 60 * sec}, 1, 0, sec},
		{"Doubles", store.Backoff{Base: sec, Max: 60 * sec}, 4, 0, 8 * sec},
		{"CappedAtMax", store.Backoff{Base: sec, Max: 60 * sec}, 30, 0, 60 * sec},
		{"MaxBelowBase", store.Backoff{Base: 10 * sec, Max: sec}, 3, 0, sec},
		{"JitterScalesWithDraw", store.Backoff{Base: 4 * sec, Max: 60 * sec, Jitter: 0.5}, 2, 0.5, 10 * sec},
		{"ZeroMaxIsUncapped", store.Backoff{Base: sec}, 11, 0, 1024 * sec},
		{"ZeroBase", store.Backoff{Jitter: 1}, 7, 0.9, 0},
		{"DrawOfOneIsZero", store.Backoff{Base: sec, Jitter: 1}, 1, 1, sec},
		{"NegativeDrawIsZero", store.Backoff{Base: sec, Jitter: 1}, 1, -0.1, sec},
		{"ManyAttemptsSaturate", store.Backoff{Base: sec}, 1000, 0, maxBackoff},
		{"ManyAttemptsWithJitterSaturate", store.Backoff{Base: int64(time.Hour), Jitter: 10}, 1000, 0.99, maxBackoff},
		{"HugeBaseSaturates", store.Backoff{Base: math.MaxInt64, Jitter: 10}, 1, 0.99, maxBackoff},
		{"HugeMaxSaturates", store.Backoff{Base: sec, Max: math.MaxInt64, Jitter: 2}, 200, 0.5, maxBackoff},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := backoffDelay(c.b, c.attempt, c.draw); got != c.want {
				t.Fatalf("backoffDelay(%+v, %d, %v) = %d, want %d", c.b, c.attempt, c.draw, got, c.want)
			}
		})
	}
}

func TestTail(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "def"},
		{"aé", 2, "é"},
		{"xéz", 3, "éz"},         // a whole rune fits
		{"xéz", 2, "z"},          // the cut lands inside é
		{"a\U0001F600b", 4, "b"}, // inside a 4-byte rune
	}
	for _, c := range cases {
		if got := tail(c.in, c.max); got != c.want {
			t.Errorf("tail(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
