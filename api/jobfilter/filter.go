package jobfilter

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/go-bexpr/grammar"

	"github.com/workron/workron/store"
)

// Bounds of one filter.
const (
	// MaxLength is the longest filter, in bytes.
	MaxLength = 2048
	// MaxTerms is the most match expressions (field OP value) one filter
	// holds.
	MaxTerms = 32
	// MaxDepth is the deepest parentheses may nest: the parser backtracks
	// about four times as much for each level.
	MaxDepth = 3
	// maxParseSteps bounds the parser's work whatever the text; a filter
	// that needs more is refused.
	maxParseSteps = 200_000
)

// Error is a filter that does not compile. Offset is the byte offset in the
// filter's text where it goes wrong, -1 when the error is about the whole
// filter; Error() gives it as a 1-based column in characters.
type Error struct {
	Offset int
	Msg    string
	col    int // set by Compile from Offset
}

func (e *Error) Error() string {
	if e.col > 0 {
		return fmt.Sprintf("at column %d: %s", e.col, e.Msg)
	}
	return e.Msg
}

// Column is the 1-based column (in characters) Error names, 0 for none.
func (e *Error) Column() int { return e.col }

// Filter is a compiled filter: Match decides, Terms name what an index may
// narrow the search to. The zero Filter and a nil *Filter match every job.
type Filter struct {
	match func(*store.Job) bool // nil: every job
	terms []Term
	only  bool // the terms say all the filter does (see OnlyTerms)
}

// Match reports whether the filter keeps j.
func (f *Filter) Match(j *store.Job) bool {
	return f == nil || f.match == nil || f.match(j)
}

// Empty reports whether the filter keeps every job.
func (f *Filter) Empty() bool { return f == nil || f.match == nil }

// Terms are the equality and created_at range conditions of the filter's
// top-level conjunction (see Term); nil when there are none.
func (f *Filter) Terms() []Term {
	if f == nil {
		return nil
	}
	return f.terms
}

// OnlyTerms reports whether the filter keeps exactly the jobs that meet
// all its Terms, so that an index serving every term counts its jobs
// without reading them: its top level is a conjunction of terms, none of
// them a status of pending or scheduled (which of the two a pending job
// shows depends on its run time).
func (f *Filter) OnlyTerms() bool { return f.Empty() || f.only }

// Compile compiles a filter expression (see the package doc); now (Unix
// nanoseconds) is the time "now" and "scheduled" mean. Blank text keeps
// every job. A filter that does not compile is an *Error.
func Compile(text string, now int64) (*Filter, error) {
	f, err := compile(text, now)
	var fe *Error
	if errors.As(err, &fe) {
		if fe.Offset >= 0 {
			fe.col = utf8.RuneCountInString(text[:min(fe.Offset, len(text))]) + 1
		}
		return nil, fe
	}
	return f, err
}

func compile(text string, now int64) (*Filter, error) {
	if len(text) > MaxLength {
		return nil, &Error{Offset: -1, Msg: fmt.Sprintf("%d bytes long; at most %d", len(text), MaxLength)}
	}
	if strings.TrimSpace(text) == "" {
		return &Filter{}, nil
	}
	rw, err := rewrite(text)
	if err != nil {
		return nil, err
	}
	ast, err := grammar.Parse("", rw.text, grammar.MaxExpressions(maxParseSteps))
	if err != nil {
		return nil, parseError(err, rw, text)
	}
	c := &compiler{text: text, now: now}
	match, err := c.expr(ast.(grammar.Expression))
	if err != nil {
		return nil, err
	}
	e := ast.(grammar.Expression)
	return &Filter{match: match, terms: mergeTerms(topTerms(e, now)), only: onlyTerms(e, now)}, nil
}

// parseErrorAt reads the position bexpr's parser gives ("1:7 (6): rule
// ...: message", the offset in parentheses) and its message.
var parseErrorAt = regexp.MustCompile(`^\d+:\d+ \((\d+)\): (?:rule ("[^"]*"|\w+): )?(.*)`)

func parseError(err error, rw *rewritten, text string) error {
	first, _, _ := strings.Cut(err.Error(), "\n")
	m := parseErrorAt.FindStringSubmatch(first)
	if m == nil {
		return &Error{Offset: -1, Msg: first}
	}
	off, _ := strconv.Atoi(m[1])
	msg := m[3]
	switch {
	case strings.Contains(msg, "max number of expressions"):
		return &Error{Offset: -1, Msg: "too complex to parse"}
	case strings.HasPrefix(msg, "no match found, expected: "):
		msg = "expected " + strings.TrimPrefix(msg, "no match found, expected: ")
		if off >= len(rw.text) {
			msg = "the filter ends early: " + msg
		}
	case m[2] != "":
		msg = strings.Trim(m[2], `"`) + ": " + msg
	}
	return &Error{Offset: rw.origin(off, len(text)), Msg: msg}
}

// And is the conjunction of filters: it keeps what every one keeps, and
// has the terms of all. Nil and empty filters are left out.
func And(fs ...*Filter) *Filter {
	out := Filter{only: true}
	var matches []func(*store.Job) bool
	for _, f := range fs {
		if f.Empty() {
			continue
		}
		out.only = out.only && f.only
		matches = append(matches, f.match)
		out.terms = append(out.terms, f.terms...)
	}
	out.terms = mergeTerms(out.terms)
	switch len(matches) {
	case 0:
		return &out
	case 1:
		out.match = matches[0]
	default:
		out.match = func(j *store.Job) bool {
			for _, m := range matches {
				if !m(j) {
					return false
				}
			}
			return true
		}
	}
	return &out
}

// Equal is the filter `field == value` for a field name of the language
// (metadata keys as "metadata.K"), for callers that hold a value they must
// not quote into an expression. A field or value the language refuses is
// an *Error whose Offset is -1.
func Equal(field, value string, now int64) (*Filter, error) {
	path := []string{field}
	if k, ok := strings.CutPrefix(field, "metadata."); ok {
		path = []string{"metadata", k}
	}
	m := &grammar.MatchExpression{
		Selector: grammar.Selector{Type: grammar.SelectorTypeBexpr, Path: path},
		Operator: grammar.MatchEqual,
		Value:    &grammar.MatchValue{Raw: value},
	}
	c := &compiler{now: now}
	match, err := c.match(m)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			fe.Offset = -1
		}
		return nil, err
	}
	return &Filter{match: match, terms: mergeTerms(topTerms(m, now)), only: onlyTerms(m, now)}, nil
}
