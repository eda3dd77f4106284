package jobfilter

import (
	"math"
	"strings"

	"github.com/hashicorp/go-bexpr/grammar"
)

// Field names what a Term constrains: the fields an index may serve.
type Field string

// The fields of terms.
const (
	FieldStatus         Field = "status"
	FieldQueue          Field = "queue"
	FieldType           Field = "type"
	FieldConcurrencyKey Field = "concurrency_key"
	FieldSchedule       Field = "schedule"
	FieldMetadata       Field = "metadata"   // Key = Value
	FieldCreated        Field = "created_at" // From <= created_at < To
)

// Term is one condition of a filter's top-level conjunction that an index
// could serve. Every job the filter keeps meets every term, so a store may
// read only the jobs an index gives for a term; the filter's Match still
// decides (a term says nothing of the rest of the filter). Terms come only
// from `==` and created_at comparisons joined by `and` at the top, never
// from under `or` or `not`.
type Term struct {
	Field Field
	// Key is the metadata key of a FieldMetadata term.
	Key string
	// Value is the value of an equality term. For FieldStatus it is the
	// stored status: "scheduled" is store.StatusPending (Match tells
	// pending from scheduled by the run time).
	Value string
	// From and To bound a FieldCreated term, in Unix nanoseconds:
	// From <= created_at < To. Without a lower bound From is 0, without
	// an upper bound To is math.MaxInt64.
	From, To int64
}

// topTerms collects the terms of e's top-level conjunction.
func topTerms(e grammar.Expression, now int64) []Term {
	switch n := e.(type) {
	case *grammar.BinaryExpression:
		if n.Operator != grammar.BinaryOpAnd {
			return nil
		}
		return append(topTerms(n.Left, now), topTerms(n.Right, now)...)
	case *grammar.MatchExpression:
		if t, ok := term(n, now); ok {
			return []Term{t}
		}
	}
	return nil
}

// onlyTerms reports whether e is a conjunction of terms that say all it
// does (Filter.OnlyTerms).
func onlyTerms(e grammar.Expression, now int64) bool {
	switch n := e.(type) {
	case *grammar.BinaryExpression:
		return n.Operator == grammar.BinaryOpAnd && onlyTerms(n.Left, now) && onlyTerms(n.Right, now)
	case *grammar.MatchExpression:
		t, ok := term(n, now)
		return ok && !(t.Field == FieldStatus && t.Value == "pending")
	}
	return false
}

// term is the Term of one match, if it has one; m compiled already.
func term(m *grammar.MatchExpression, now int64) (Term, bool) {
	if m.Operator != grammar.MatchEqual || m.Value == nil {
		return Term{}, false
	}
	name, cmp, _ := strings.Cut(m.Selector.Path[0], "/")
	v := m.Value.Raw
	switch {
	case name == "metadata" && len(m.Selector.Path) == 2 && cmp == "":
		return Term{Field: FieldMetadata, Key: m.Selector.Path[1], Value: v}, true
	case len(m.Selector.Path) != 1:
		return Term{}, false
	case name == "created_at" && cmp != "":
		t, err := parseTime(v, now)
		if err != nil {
			return Term{}, false
		}
		r := Term{Field: FieldCreated, From: 0, To: math.MaxInt64}
		switch cmp {
		case "lt":
			r.To = t
		case "le":
			r.To = t + 1
		case "gt":
			r.From = t + 1
		case "ge":
			r.From = t
		}
		return r, true
	case cmp != "":
		return Term{}, false
	case name == "status":
		if v == "scheduled" {
			v = "pending"
		}
		return Term{Field: FieldStatus, Value: v}, true
	case name == "queue", name == "type", name == "concurrency_key", name == "schedule":
		return Term{Field: Field(name), Value: v}, true
	}
	return Term{}, false
}

// mergeTerms intersects the created_at ranges into one term, after the
// equality terms.
func mergeTerms(ts []Term) []Term {
	var out []Term
	var created *Term
	for _, t := range ts {
		if t.Field != FieldCreated {
			out = append(out, t)
			continue
		}
		if created == nil {
			c := t
			created = &c
			continue
		}
		created.From, created.To = max(created.From, t.From), min(created.To, t.To)
	}
	if created != nil {
		out = append(out, *created)
	}
	return out
}
