package jobfilter

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/go-bexpr/grammar"

	"github.com/workron/workron/store"
)

// compiler turns bexpr's syntax tree into closures over *store.Job.
type compiler struct {
	text  string // as typed, to point at what is wrong
	now   int64
	terms int // match expressions so far
}

type matchFn = func(*store.Job) bool

func (c *compiler) expr(e grammar.Expression) (matchFn, error) {
	switch n := e.(type) {
	case *grammar.BinaryExpression:
		l, err := c.expr(n.Left)
		if err != nil {
			return nil, err
		}
		r, err := c.expr(n.Right)
		if err != nil {
			return nil, err
		}
		if n.Operator == grammar.BinaryOpOr {
			return func(j *store.Job) bool { return l(j) || r(j) }, nil
		}
		return func(j *store.Job) bool { return l(j) && r(j) }, nil
	case *grammar.UnaryExpression:
		inner, err := c.expr(n.Operand)
		if err != nil {
			return nil, err
		}
		return func(j *store.Job) bool { return !inner(j) }, nil
	case *grammar.MatchExpression:
		if c.terms++; c.terms > MaxTerms {
			return nil, &Error{Offset: -1, Msg: fmt.Sprintf("more than %d terms", MaxTerms)}
		}
		return c.match(n)
	case *grammar.CollectionExpression:
		return nil, c.errAt(strings.ToLower(string(n.Op)), `any and all are not supported: use "k" in metadata, or metadata["k"] == "v"`)
	}
	return nil, &Error{Offset: -1, Msg: fmt.Sprintf("unsupported expression %T", e)}
}

// match compiles one `selector OP value`.
func (c *compiler) match(m *grammar.MatchExpression) (matchFn, error) {
	name, cmp, _ := strings.Cut(m.Selector.Path[0], "/")
	path := m.Selector.Path
	if cmp != "" && (!validCmp[cmp] || m.Operator != grammar.MatchEqual) {
		return nil, c.errAt(name, fmt.Sprintf("unknown field %q; the fields are %s", path[0], fieldNames))
	}
	if name == "metadata" {
		return c.metadata(m, path, cmp)
	}
	if len(path) > 1 {
		return nil, c.errAt(name, fmt.Sprintf("%s has no field %q", name, path[1]))
	}
	if name == "status" {
		return c.status(m, cmp)
	}
	if f, ok := strFields[name]; ok {
		return c.str(m, name, cmp, f)
	}
	if f, ok := intFields[name]; ok {
		return c.num(m, name, cmp, f)
	}
	if f, ok := timeFields[name]; ok {
		return c.time(m, name, cmp, f)
	}
	return nil, c.errAt(name, fmt.Sprintf("unknown field %q; the fields are %s", name, fieldNames))
}

// validCmp are the selector suffixes rewrite gives comparisons.
var validCmp = map[string]bool{"lt": true, "le": true, "gt": true, "ge": true}

// strFields are the string fields and how to read each.
var strFields = map[string]func(*store.Job) string{
	"id":              func(j *store.Job) string { return j.ID },
	"queue":           func(j *store.Job) string { return j.Queue },
	"type":            func(j *store.Job) string { return j.Type },
	"worker_id":       func(j *store.Job) string { return j.WorkerID },
	"worker":          func(j *store.Job) string { return j.WorkerID },
	"concurrency_key": func(j *store.Job) string { return j.ConcurrencyKey },
	"schedule":        func(j *store.Job) string { return j.Schedule },
	"gang_id":         func(j *store.Job) string { return j.GangID },
	"command":         func(j *store.Job) string { return j.Command },
	"last_error":      func(j *store.Job) string { return j.LastError },
}

var intFields = map[string]func(*store.Job) int64{
	"priority":     func(j *store.Job) int64 { return int64(j.Priority) },
	"attempts":     func(j *store.Job) int64 { return int64(j.Attempts) },
	"max_attempts": func(j *store.Job) int64 { return int64(j.MaxAttempts) },
}

var timeFields = map[string]func(*store.Job) int64{
	"created_at": func(j *store.Job) int64 { return j.CreatedAt },
	"run_at":     func(j *store.Job) int64 { return j.RunAt },
	"started_at": func(j *store.Job) int64 { return j.StartedAt },
	"done_at":    func(j *store.Job) int64 { return j.DoneAt },
}

const fieldNames = "id, status, queue, type, priority, attempts, max_attempts, worker_id (or worker), concurrency_key, schedule, gang_id, " +
	"command, last_error, created_at, run_at, started_at, done_at, metadata"

// Statuses are the statuses the API shows, which a status filter may name.
var Statuses = []string{"blocked", "scheduled", "pending", "reserved", "running", "cancelling", "done", "failed", "cancelled"}

// ShownStatus is the status the API shows for j at now: a pending job
// whose run time is still ahead is "scheduled".
func ShownStatus(j *store.Job, now int64) string {
	if Scheduled(j.Status, j.RunAt, now) {
		return "scheduled"
	}
	return string(j.Status)
}

// Scheduled reports whether a job of status st and run time runAt shows
// as "scheduled" at now: pending, its run time ahead.
func Scheduled(st store.Status, runAt, now int64) bool {
	return st == store.StatusPending && runAt > now
}

// status compiles a match on the status the API shows (toWire's):
// a pending job whose run time is ahead is "scheduled".
func (c *compiler) status(m *grammar.MatchExpression, cmp string) (matchFn, error) {
	now := c.now
	get := func(j *store.Job) string { return ShownStatus(j, now) }
	if (m.Operator == grammar.MatchEqual || m.Operator == grammar.MatchNotEqual) && cmp == "" {
		v := m.Value.Raw
		ok := false
		for _, s := range Statuses {
			ok = ok || s == v
		}
		if !ok {
			return nil, c.errAt(v, fmt.Sprintf("status %q is not one of %s", v, strings.Join(Statuses, ", ")))
		}
	}
	return c.str(m, "status", cmp, get)
}

// str compiles a match on a string field.
func (c *compiler) str(m *grammar.MatchExpression, name, cmp string, get func(*store.Job) string) (matchFn, error) {
	if cmp != "" {
		return nil, c.errAt(name, name+" is text: compare it with ==, !=, contains, matches or is empty, not < or >")
	}
	test, err := c.strTest(m, name)
	if err != nil {
		return nil, err
	}
	return func(j *store.Job) bool { return test(get(j)) }, nil
}

// strTest compiles the test a match applies to a string.
func (c *compiler) strTest(m *grammar.MatchExpression, name string) (func(string) bool, error) {
	var v string
	if m.Value != nil {
		v = m.Value.Raw
	}
	switch m.Operator {
	case grammar.MatchEqual:
		return func(s string) bool { return s == v }, nil
	case grammar.MatchNotEqual:
		return func(s string) bool { return s != v }, nil
	case grammar.MatchContains, grammar.MatchIn:
		return func(s string) bool { return strings.Contains(s, v) }, nil
	case grammar.MatchNotContains, grammar.MatchNotIn:
		return func(s string) bool { return !strings.Contains(s, v) }, nil
	case grammar.MatchIsEmpty:
		return func(s string) bool { return s == "" }, nil
	case grammar.MatchIsNotEmpty:
		return func(s string) bool { return s != "" }, nil
	case grammar.MatchMatches, grammar.MatchNotMatches:
		re, err := regexp.Compile(v)
		if err != nil {
			return nil, c.errAt(v, fmt.Sprintf("%s matches: not a regular expression: %v", name, err))
		}
		want := m.Operator == grammar.MatchMatches
		return func(s string) bool { return re.MatchString(s) == want }, nil
	}
	return nil, c.errAt(name, fmt.Sprintf("%s: operator %q does not apply to text", name, m.Operator))
}

// metadata compiles `metadata["k"] OP v`, `"k" in metadata` and
// `metadata is empty`. A missing key matches as bexpr has it: == and
// contains and matches are false, their negations true, is empty true.
func (c *compiler) metadata(m *grammar.MatchExpression, path []string, cmp string) (matchFn, error) {
	if cmp != "" {
		return nil, c.errAt("metadata", "metadata values are text: compare them with ==, !=, contains, matches or is empty, not < or >")
	}
	switch len(path) {
	case 1:
		switch m.Operator {
		case grammar.MatchIn, grammar.MatchNotIn:
			k, want := m.Value.Raw, m.Operator == grammar.MatchIn
			return func(j *store.Job) bool { _, ok := j.Metadata[k]; return ok == want }, nil
		case grammar.MatchIsEmpty, grammar.MatchIsNotEmpty:
			want := m.Operator == grammar.MatchIsEmpty
			return func(j *store.Job) bool { return (len(j.Metadata) == 0) == want }, nil
		}
		return nil, c.errAt("metadata", `metadata takes "k" in metadata, metadata is empty, or a key: metadata["k"] == "v"`)
	case 2:
		test, err := c.strTest(m, "metadata")
		if err != nil {
			return nil, err
		}
		k, missing := path[1], m.Operator.NotPresentDisposition()
		return func(j *store.Job) bool {
			v, ok := j.Metadata[k]
			if !ok {
				return missing
			}
			return test(v)
		}, nil
	}
	return nil, c.errAt("metadata", fmt.Sprintf("metadata values are text, without fields: %q", strings.Join(path, ".")))
}

// num compiles a match on a whole-number field.
func (c *compiler) num(m *grammar.MatchExpression, name, cmp string, get func(*store.Job) int64) (matchFn, error) {
	if cmp == "" {
		switch m.Operator {
		case grammar.MatchEqual:
			cmp = "eq"
		case grammar.MatchNotEqual:
			cmp = "ne"
		default:
			return nil, c.errAt(name, fmt.Sprintf("%s is a number: compare it with ==, !=, <, <=, > or >=", name))
		}
	}
	v, err := strconv.ParseInt(m.Value.Raw, 10, 64)
	if err != nil {
		return nil, c.errAt(m.Value.Raw, fmt.Sprintf("%s: %q is not a whole number", name, m.Value.Raw))
	}
	return compare(cmp, get, v), nil
}

// time compiles a match on a time field: a comparison, or is (not) empty
// for a time not (yet) set.
func (c *compiler) time(m *grammar.MatchExpression, name, cmp string, get func(*store.Job) int64) (matchFn, error) {
	if cmp == "" {
		switch m.Operator {
		case grammar.MatchIsEmpty:
			return func(j *store.Job) bool { return get(j) == 0 }, nil
		case grammar.MatchIsNotEmpty:
			return func(j *store.Job) bool { return get(j) != 0 }, nil
		}
		return nil, c.errAt(name, fmt.Sprintf("%s is a time: compare it with <, <=, > or >= (e.g. %s > now-1h), or ask is empty", name, name))
	}
	t, err := parseTime(m.Value.Raw, c.now)
	if err != nil {
		return nil, c.errAt(m.Value.Raw, fmt.Sprintf("%s: %v", name, err))
	}
	// An unset time (0) is never before or after anything.
	f := compare(cmp, get, t)
	return func(j *store.Job) bool { return get(j) != 0 && f(j) }, nil
}

// compare is get(j) OP v for a comparison suffix (lt, le, gt, ge, eq, ne).
func compare(cmp string, get func(*store.Job) int64, v int64) matchFn {
	switch cmp {
	case "lt":
		return func(j *store.Job) bool { return get(j) < v }
	case "le":
		return func(j *store.Job) bool { return get(j) <= v }
	case "gt":
		return func(j *store.Job) bool { return get(j) > v }
	case "ge":
		return func(j *store.Job) bool { return get(j) >= v }
	case "ne":
		return func(j *store.Job) bool { return get(j) != v }
	}
	return func(j *store.Job) bool { return get(j) == v }
}

// errAt is an error at the first place word appears in the filter's text
// as a whole word (the syntax tree keeps no positions), or about the whole
// filter when it does not.
func (c *compiler) errAt(word, msg string) error {
	return &Error{Offset: findWord(c.text, word), Msg: msg}
}

func findWord(text, word string) int {
	if word == "" {
		return -1
	}
	for from := 0; from < len(text); {
		i := strings.Index(text[from:], word)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(word)
		if (i == 0 || !isIdent(text[i-1])) && (end == len(text) || !isIdent(text[end])) {
			return i
		}
		from = i + 1
	}
	return -1
}
