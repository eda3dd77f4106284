package api

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON lexing of bodyScan (bodybounds.go): punctuation, strings,
// whitespace, skipping a value, and naming the field at fault when a bound
// is passed.

// enter steps into the array or object at pos.
func (s *bodyScan) enter() bool {
	s.pos++
	if s.depth++; s.depth > MaxJSONDepth {
		return s.refuse(cmp.Or(s.field(), "body"), "nested deeper than %d levels", MaxJSONDepth)
	}
	return true
}

// colon moves pos past the ':' after a key.
func (s *bodyScan) colon() bool {
	s.space()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return false
	}
	s.pos++
	return true
}

// skip moves pos past the value at pos, whatever it holds, minding only
// the depth.
func (s *bodyScan) skip() bool {
	depth := 0
	for {
		s.space()
		if s.pos >= len(s.data) {
			return false
		}
		switch s.data[s.pos] {
		case '{', '[':
			if s.depth+depth+1 > MaxJSONDepth {
				return s.refuse(cmp.Or(s.field(), "body"), "nested deeper than %d levels", MaxJSONDepth)
			}
			depth++
			s.pos++
			continue
		case '}', ']':
			if depth == 0 {
				return false
			}
			depth--
			s.pos++
		case ',', ':':
			if depth == 0 {
				return false
			}
			s.pos++
			continue
		case '"':
			if _, _, ok := s.str(); !ok {
				return false
			}
		default:
			start := s.pos
			for s.pos < len(s.data) && !isDelimiter(s.data[s.pos]) {
				s.pos++
			}
			if s.pos == start {
				return false
			}
		}
		if depth == 0 {
			return true
		}
	}
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', ':', '[', ']', '{', '}', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// str moves pos past the string at pos and returns its length as
// encoding/json decodes it (escapes resolved, each invalid UTF-8 byte
// and lone surrogate as U+FFFD), and whether it held an escape.
func (s *bodyScan) str() (n int, escaped, ok bool) {
	d := s.data
	for i := s.pos + 1; i < len(d); {
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return n, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return n, escaped, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				n++
				i += 2
			case 'u':
				r := hex4(d, i)
				if r < 0 {
					return n, escaped, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2 := hex4(d, i); r2 >= 0 && utf16.DecodeRune(r, r2) != unicode.ReplacementChar {
						n += 4
						i += 6
						continue
					}
					r = unicode.ReplacementChar
				}
				n += utf8.RuneLen(r)
			default:
				return n, escaped, false
			}
		case c < 0x20:
			return n, escaped, false
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				n += 3 // U+FFFD
			} else {
				n += size
			}
			i += size
		}
	}
	return n, escaped, false
}

// hex4 reads the escape \uXXXX at d[i:], -1 if there is none.
func hex4(d []byte, i int) rune {
	if i+6 > len(d) || d[i] != '\\' || d[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range d[i+2 : i+6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// space moves pos past JSON whitespace.
func (s *bodyScan) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// field names the value being scanned: "jobs[3].metadata", or
// "metadata.K" for a map's value.
func (s *bodyScan) field() string {
	var b strings.Builder
	for _, seg := range s.path {
		switch {
		case seg.key != nil:
			b.WriteString("." + keyString(seg.key))
		case seg.name != "":
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg.name)
		case seg.index >= 0:
			b.WriteString("[" + strconv.Itoa(seg.index) + "]")
		}
	}
	return b.String()
}

// refuse records the first bound passed and stops the scan.
func (s *bodyScan) refuse(field, format string, args ...any) bool {
	s.err = &badRequest{field: field, reason: fmt.Sprintf(format, args...)}
	return false
}
