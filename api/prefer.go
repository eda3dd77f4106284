package api

import (
	"net/http"
	"strings"

	"github.com/workron/workron/api/wire"
)

// prefersMinimal reports whether the request's Prefer headers (RFC 7240)
// ask for return=minimal. The preferences are a comma-separated list
// across every Prefer header, each a name, an optional "=" and a value (a
// token or a quoted string), then ";"-separated parameters. Names and
// values match case aside, and only the first "return" preference counts
// (RFC 7240, section 2). What the server does not know or cannot read is
// ignored, as the RFC asks: the reply is then the full one.
func prefersMinimal(h http.Header) bool {
	for _, line := range h.Values(wire.HeaderPrefer) {
		for line != "" {
			var name, value string
			name, value, line = nextPreference(line)
			if strings.EqualFold(name, "return") {
				return strings.EqualFold(value, "minimal")
			}
		}
	}
	return false
}

// nextPreference reads the first preference of s: its name and value, and
// what follows the comma that ends it. It always consumes something of a
// non-empty s.
func nextPreference(s string) (name, value, rest string) {
	s = strings.TrimLeft(s, " \t")
	n := tokenLen(s)
	name, s = s[:n], strings.TrimLeft(s[n:], " \t")
	if strings.HasPrefix(s, "=") {
		value, s = readWord(strings.TrimLeft(s[1:], " \t"))
	}
	// The parameters, or what cannot be read, up to a comma outside a
	// quoted string.
	for s != "" {
		switch s[0] {
		case ',':
			return name, value, s[1:]
		case '"':
			_, s = readWord(s)
		default:
			s = s[1:]
		}
	}
	return name, value, ""
}

// readWord reads a token or a quoted string (its escapes undone) off the
// start of s.
func readWord(s string) (word, rest string) {
	if !strings.HasPrefix(s, `"`) {
		n := tokenLen(s)
		return s[:n], s[n:]
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return b.String(), s[i+1:]
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), "" // unterminated: the rest of the line
}

// tokenLen is the length of the HTTP token (RFC 9110 tchar) s starts with.
func tokenLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return i
	}
	return len(s)
}
