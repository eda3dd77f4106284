package wire

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxConcurrencyKeyBytes bounds a job's concurrency_key.
const MaxConcurrencyKeyBytes = 128

// QueueLimits is the body of PUT /queues/{name}: a queue's flow-control
// limits, replacing those it had. A field left out (nil) sets no limit of
// its kind; {} removes them all; a limit of 0 or less is refused. Concurrency bounds the attempts running in the
// queue across the cluster, KeyConcurrency those of each concurrency_key.
// Rate and KeyRate are token buckets, "N/s", "N/m" or "N/h", of Burst and
// KeyBurst tokens (defaults: N).
type QueueLimits struct {
	Concurrency    *int   `json:"concurrency,omitempty"`
	KeyConcurrency *int   `json:"key_concurrency,omitempty"`
	Rate           string `json:"rate,omitempty"`
	Burst          *int   `json:"burst,omitempty"`
	KeyRate        string `json:"key_rate,omitempty"`
	KeyBurst       *int   `json:"key_burst,omitempty"`
	// KeyWeights gives concurrency keys more turns in the queue's rotation
	// over its keys: a key of weight 3 gets up to 3 claims in a row where
	// others get 1 (the default). From 1 to 1000 each.
	KeyWeights map[string]int `json:"key_weights,omitempty"`
	// RateLimitPausesQueue lets a rate-limited attempt of a job without a
	// concurrency_key pause the whole queue (every job of it, whatever its
	// tenant); off (the default), only that job waits. MaxPause ("30s", up
	// to 24h; default 5m) caps each pause a rate-limited attempt asks for,
	// of a key or of the queue. Both need every node at protocol 4.
	RateLimitPausesQueue bool   `json:"rate_limit_pauses_queue,omitempty"`
	MaxPause             string `json:"max_pause,omitempty"`
}

// Limit is a QueueLimits field's value: nil when n is 0 (no limit).
func Limit(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// QueueFlow is a queue's limits as GET /queues shows them, with what runs
// against them and what they hold back.
type QueueFlow struct {
	QueueLimits // the limits (nil or "": none)
	// Running is the attempts running in the queue.
	Running int `json:"running"`
	// KeysAtLimit and KeysRateLimited count the keys at their concurrency
	// and out of tokens.
	KeysAtLimit     int `json:"keys_at_limit,omitempty"`
	KeysRateLimited int `json:"keys_rate_limited,omitempty"`
	// RateLimitedUntil is when the queue's bucket has a token again, if it
	// is empty.
	RateLimitedUntil *time.Time `json:"rate_limited_until,omitempty"`
	// Waiting counts the due jobs each limit holds back: "concurrency",
	// "rate", "key_concurrency", "key_rate", and the pauses of Paused:
	// "paused" (the queue's) and "key_paused".
	Waiting map[string]int `json:"waiting"`
	// Paused lists the pauses that rate-limited attempts asked for and
	// that are in force: the queue's own (no key) first, then by key; at
	// most 20 (PausedMore counts the others, which GET /pauses lists).
	Paused     []KeyPause `json:"paused,omitempty"`
	PausedMore int        `json:"paused_more,omitempty"`
}

// KeyPause is a queue's or concurrency key's pause: a job of it reported
// rate-limited (rate_limited_for), so no worker claims its jobs until
// Until.
type KeyPause struct {
	Key    string    `json:"key,omitempty"` // absent for the queue itself
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"` // the report's error
}

// Pause is a rate-limit pause in force, as GET /pauses lists it.
type Pause struct {
	Queue    string `json:"queue"`
	KeyPause        // Key absent: the queue's own pause
}

// PauseList is the reply of GET /pauses: the pauses in force, by queue
// then key (a queue's own first), at most the request's limit; Total
// counts them all; NextCursor, while more follow, is the cursor of the
// next page.
type PauseList struct {
	Pauses     []Pause `json:"pauses"`
	Total      int     `json:"total"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// PausesLifted is the reply of DELETE /queues/{name}/pauses: how many
// pauses in force it lifted, and the queue after.
type PausesLifted struct {
	Lifted int   `json:"lifted"`
	Queue  Queue `json:"queue"`
}

// ParseRate reads a rate "N/s", "N/m" or "N/h" (also "N/sec", "N/min",
// "N/hour"): N tokens per period, N from 1.
func ParseRate(field, s string) (n int64, per time.Duration, err error) {
	num, unit, ok := strings.Cut(s, "/")
	if ok {
		switch unit {
		case "s", "sec", "second":
			per = time.Second
		case "m", "min", "minute":
			per = time.Minute
		case "h", "hour":
			per = time.Hour
		}
		n, err = strconv.ParseInt(num, 10, 64)
	}
	if !ok || per == 0 || err != nil {
		return 0, 0, fmt.Errorf("%s: %q is not a rate like \"100/s\", \"600/m\" or \"10/h\"", field, s)
	}
	if n < 1 {
		return 0, 0, fmt.Errorf("%s: must be at least 1 per period, got %q", field, s)
	}
	return n, per, nil
}

// FormatRate writes a rate as ParseRate reads it.
func FormatRate(n int64, per time.Duration) string {
	switch per {
	case time.Second:
		return fmt.Sprintf("%d/s", n)
	case time.Minute:
		return fmt.Sprintf("%d/m", n)
	case time.Hour:
		return fmt.Sprintf("%d/h", n)
	}
	return fmt.Sprintf("%d/%s", n, per)
}
