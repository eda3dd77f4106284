package api

import (
	"encoding/base64"
	"net/url"
	"strconv"
)

// Limits of the lists paged by name or id (GET /workers, /queues,
// /schedules): a page holds at most MaxPageLimit items,
// DefaultPageLimit without ?limit=, with a next_cursor while more follow.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// pageQuery reads a list's ?limit= (from 1 to MaxPageLimit;
// DefaultPageLimit without one) and ?cursor= (a next_cursor of a previous
// page: the key after which the page starts; "" from the first). A bad
// value is an invalid-field error naming it.
func pageQuery(q url.Values) (limit int, after string, err error) {
	limit = DefaultPageLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			return 0, "", invalid("limit", "must be a number from 1 to %d, got %q", MaxPageLimit, v)
		}
		limit = n
	}
	if v := q.Get("cursor"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return 0, "", invalid("cursor", "%q is not a cursor from a previous page", v)
		}
		after = string(b)
	}
	return limit, after, nil
}

// nextCursor is the next_cursor of a page whose last item has key.
func nextCursor(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}
