package jobfilter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseTime reads a filter's time: RFC 3339 ("2026-11-23T10:00:00Z", with
// fractions of a second or not), a date ("2026-11-23", midnight UTC), or
// now with an offset ("now", "now-1h30m", "now+10m", "now-2d"; d is 24h).
// It returns Unix nanoseconds.
func parseTime(s string, now int64) (int64, error) {
	if rest, ok := strings.CutPrefix(s, "now"); ok {
		if rest == "" {
			return now, nil
		}
		d, err := parseOffset(rest)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", s, err)
		}
		return now + int64(d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.UnixNano(), nil
	}
	return 0, fmt.Errorf("%q is not a time: give RFC 3339 (2026-11-23T10:00:00Z), a date (2026-11-23) or now-1h", s)
}

// maxOffset bounds now's offset, far inside int64 nanoseconds.
const maxOffset = 100 * 365 * 24 * time.Hour

// parseOffset reads "+D" or "-D", D a Go duration that may start with a
// number of days ("2d", "1d12h").
func parseOffset(s string) (time.Duration, error) {
	if s == "" || (s[0] != '+' && s[0] != '-') {
		return 0, errors.New("after now comes + or - and a duration, e.g. now-1h")
	}
	sign, s := s[0], s[1:]
	if s == "" {
		return 0, errors.New("a duration follows the sign, e.g. now-1h")
	}
	var d time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err == nil && n <= int(maxOffset/(24*time.Hour)) {
			d, s = time.Duration(n)*24*time.Hour, s[i+1:]
		}
	}
	if s != "" {
		rest, err := time.ParseDuration(s)
		if err != nil || rest < 0 {
			return 0, errors.New("not a duration such as 1h30m or 2d")
		}
		d += rest
	}
	if d > maxOffset {
		return 0, errors.New("more than 100 years from now")
	}
	if sign == '-' {
		d = -d
	}
	return d, nil
}
