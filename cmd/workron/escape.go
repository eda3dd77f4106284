package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// escapeControls is the one place that makes text from a server or a job
// (a command, output, progress message, error) safe to show a person: each
// control character but newline and tab (C0, DEL, C1: escape sequences,
// carriage returns, backspaces, OSC 52 clipboard writes, title changes),
// each bidirectional formatting character (text that reads other than it
// runs) and each byte that is not UTF-8 is written as a Go escape (\x1b,
// \u202e), so a terminal shows it instead of obeying it. Every
// human-readable printer of cmd/workron writes through it (escaping); -o
// json does not, and stays exact JSON (whose encoder escapes controls
// itself).
func escapeControls(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether escapeControls changes s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || unsafeRune(r) {
			return true
		}
		i += n
	}
	return false
}

// unsafeRune reports whether a terminal may act on r rather than show it.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f: // C0, DEL, C1
		return true
	case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c: // bidi
		return true
	}
	return false
}

// escaping is a writer that passes what is written through
// escapeControls. Each Write is escaped on its own: the printers write
// whole strings (fmt, tabwriter cells), never part of a character.
type escaping struct{ w io.Writer }

func (e escaping) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, escapeControls(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
