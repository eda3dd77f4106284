package jobfilter

import (
	"fmt"
	"strings"
)

// rewritten is a filter's text as bexpr's grammar is given it, with where
// each of its bytes came from in the text as typed.
type rewritten struct {
	text []byte
	from []int // from[i]: the offset in the typed text of text[i]
}

func (r *rewritten) add(b byte, at int) {
	r.text = append(r.text, b)
	r.from = append(r.from, at)
}

func (r *rewritten) addString(s string, at int) {
	for i := range len(s) {
		r.add(s[i], at)
	}
}

// origin maps an offset in the rewritten text back to the typed text.
func (r *rewritten) origin(off, typed int) int {
	switch {
	case off < 0:
		return 0
	case off < len(r.from):
		return r.from[off]
	default:
		return typed
	}
}

// comparisons maps each comparison operator to the selector suffix it
// becomes.
var comparisons = map[string]string{"<": "lt", "<=": "le", ">": "gt", ">=": "ge"}

// rewrite refuses parentheses nested deeper than MaxDepth (outside string
// literals), and turns each comparison `field OP value` of src, outside string
// literals, into `field/OP==value`, which bexpr's grammar parses as a match
// of the selector "field/OP", and quotes a bare value after it that holds
// a '-', ':' or '+' (a time such as now-1h or 2026-11-23, a negative
// number). A comparison not after a field name is an error.
func rewrite(src string) (*rewritten, error) {
	r := &rewritten{text: make([]byte, 0, len(src)+16), from: make([]int, 0, len(src)+16)}
	depth := 0
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"' || c == '`':
			stop := len(src) // unterminated: the grammar says so
			if j := strings.IndexByte(src[i+1:], c); j >= 0 {
				stop = i + j + 2
			}
			for k := i; k < stop; k++ {
				r.add(src[k], k)
			}
			i = stop
		case c == '(' || c == ')':
			if c == '(' {
				depth++
			} else {
				depth--
			}
			if depth > MaxDepth {
				return nil, &Error{Offset: i, Msg: fmt.Sprintf("parentheses nested deeper than %d", MaxDepth)}
			}
			r.add(c, i)
			i++
		case c == '<' || c == '>':
			op := string(c)
			if i+1 < len(src) && src[i+1] == '=' {
				op += "="
			}
			if !afterField(r.text) {
				return nil, &Error{Offset: i, Msg: op + " compares a number or time field with a value, e.g. created_at > now-1h or priority >= 5; put the field first"}
			}
			for len(r.text) > 0 && isSpace(r.text[len(r.text)-1]) {
				r.text, r.from = r.text[:len(r.text)-1], r.from[:len(r.from)-1]
			}
			r.addString("/"+comparisons[op]+"==", i)
			i += len(op)
			i = r.quoteBare(src, i)
		default:
			r.add(c, i)
			i++
		}
	}
	return r, nil
}

// quoteBare copies the whitespace and the bare value at src[i:] that
// follow a comparison, quoting the value if it holds a '-', ':' or '+',
// and returns where it stopped.
func (r *rewritten) quoteBare(src string, i int) int {
	for i < len(src) && isSpace(src[i]) {
		r.add(src[i], i)
		i++
	}
	end := i
	for end < len(src) && isBare(src[end]) {
		end++
	}
	word := src[i:end]
	if !strings.ContainsAny(word, "-:+") {
		return i // a number, a name or a string literal: as it is
	}
	r.add('"', i)
	for k := i; k < end; k++ {
		r.add(src[k], k)
	}
	r.add('"', end)
	return end
}

// afterField reports whether text ends, but for spaces, with a name that
// could be a field (letters, digits and '_', starting with a letter, not
// after a '.': metadata values are text, never compared by order).
func afterField(text []byte) bool {
	end := len(text)
	for end > 0 && isSpace(text[end-1]) {
		end--
	}
	start := end
	for start > 0 && isIdent(text[start-1]) {
		start--
	}
	return start < end && isLetter(text[start]) && (start == 0 || text[start-1] != '.')
}

func isSpace(c byte) bool  { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdent(c byte) bool  { return isLetter(c) || c >= '0' && c <= '9' || c == '_' }
func isBare(c byte) bool   { return isIdent(c) || strings.IndexByte("-:+.", c) >= 0 }
