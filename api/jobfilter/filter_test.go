package jobfilter_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/jobfilter"
	"github.com/workron/workron/store"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func ns(t time.Time) int64 { return t.UnixNano() }

// jobs are the jobs the table filters, by name.
func jobs() map[string]*store.Job {
	return map[string]*store.Job{
		"failedEmail": {
			ID: "job-1", Status: store.StatusFailed, Queue: "emails", Type: "send", Priority: 5, Attempts: 3,
			Command: "", LastError: "dial tcp: i/o timeout", Metadata: map[string]string{"tenant": "acme", "region": "eu.west"},
			CreatedAt: ns(now.Add(-30 * time.Minute)), RunAt: ns(now.Add(-30 * time.Minute)),
			StartedAt: ns(now.Add(-20 * time.Minute)), DoneAt: ns(now.Add(-10 * time.Minute)), WorkerID: "w1",
		},
		"scheduledReport": {
			ID: "job-2", Status: store.StatusPending, Queue: "reports", Command: "make report",
			Metadata: map[string]string{"tenant": "globex"}, Schedule: "nightly", ConcurrencyKey: "globex",
			CreatedAt: ns(now.Add(-48 * time.Hour)), RunAt: ns(now.Add(time.Hour)),
		},
		"pendingOld": {
			ID: "job-3", Status: store.StatusPending, Queue: "default", Command: "echo hi", Priority: -2,
			CreatedAt: ns(now.Add(-72 * time.Hour)), RunAt: ns(now.Add(-72 * time.Hour)),
		},
	}
}

// TestFilterMatches: each filter keeps exactly the jobs named.
func TestFilterMatches(t *testing.T) {
	all := jobs()
	cases := []struct {
		filter string
		want   string // names, space separated, sorted
	}{
		{``, "failedEmail pendingOld scheduledReport"},
		{`status == failed`, "failedEmail"},
		{`status == "scheduled"`, "scheduledReport"},
		{`status == "pending"`, "pendingOld"},
		{`status != "failed"`, "pendingOld scheduledReport"},
		{`queue == "emails" and status == "failed"`, "failedEmail"},
		{`queue == "emails" or queue == reports`, "failedEmail scheduledReport"},
		{`not (queue == "emails")`, "pendingOld scheduledReport"},
		{`id == "job-3"`, "pendingOld"},
		{`type == send`, "failedEmail"},
		{`type is empty`, "pendingOld scheduledReport"},
		{`priority > 0`, "failedEmail"},
		{`priority >= -2 and priority < 5`, "pendingOld scheduledReport"},
		{`priority<0`, "pendingOld"},
		{`priority > -3`, "failedEmail pendingOld scheduledReport"},
		{`attempts == 3`, "failedEmail"},
		{`worker == w1`, "failedEmail"},
		{`worker_id is not empty`, "failedEmail"},
		{`concurrency_key == "globex"`, "scheduledReport"},
		{`schedule == "nightly"`, "scheduledReport"},
		{`metadata["tenant"] == "acme"`, "failedEmail"},
		{`metadata.tenant == "globex"`, "scheduledReport"},
		{`metadata["region"] == "eu.west"`, "failedEmail"},
		{`metadata["a/gt"] == "x"`, ""},
		{`"/metadata/tenant" == "acme"`, "failedEmail"},
		{`metadata.tenant != "acme"`, "pendingOld scheduledReport"},
		{`"tenant" in metadata`, "failedEmail scheduledReport"},
		{`"tenant" not in metadata`, "pendingOld"},
		{`metadata is empty`, "pendingOld"},
		{`last_error contains "timeout"`, "failedEmail"},
		{`last_error matches "i/o time(out)?$"`, "failedEmail"},
		{`command matches "^make "`, "scheduledReport"},
		{"command matches `^make\\s+rep`", "scheduledReport"},
		{`command matches "^echo\\s"`, "pendingOld"},
		{`command not contains "echo"`, "failedEmail scheduledReport"},
		{`"report" in command`, "scheduledReport"},
		{`created_at > now-1h`, "failedEmail"},
		{`created_at > "now-1h"`, "failedEmail"},
		{`created_at >= 2026-11-25 and created_at < 2026-11-26T00:00:00Z`, "scheduledReport"},
		{`created_at <= now-2d`, "pendingOld scheduledReport"},
		{`run_at > now`, "scheduledReport"},
		{`started_at > "now-1h"`, "failedEmail"},
		{`started_at is empty`, "pendingOld scheduledReport"},
		{`done_at < now`, "failedEmail"},
		{`done_at > now-1d12h`, "failedEmail"},
		{`(status == failed or status == scheduled) and not metadata.tenant == acme`, "scheduledReport"},
	}
	for _, c := range cases {
		t.Run(c.filter, func(t *testing.T) {
			f, err := jobfilter.Compile(c.filter, ns(now))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			var got []string
			for _, name := range []string{"failedEmail", "pendingOld", "scheduledReport"} {
				if f.Match(all[name]) {
					got = append(got, name)
				}
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("keeps %q, want %q", g, c.want)
			}
		})
	}
}

// TestFilterErrors: a filter that does not compile says where (the
// column in the text as typed) and what is wrong.
func TestFilterErrors(t *testing.T) {
	cases := []struct {
		filter string
		col    int
		says   string
	}{
		{`status = "failed"`, 8, `expected "!="`},
		{`status == `, 11, "ends early"},
		{`status == "failed" and`, 23, "ends early"},
		{`(status == "failed"`, 20, "Unmatched parentheses"},
		{`staus == "failed"`, 1, `unknown field "staus"`},
		{`queue == a and status == "faild"`, 27, `status "faild" is not one of`},
		{`priority > high`, 12, `"high" is not a whole number`},
		{`priority contains 3`, 1, "priority is a number"},
		{`queue > "b"`, 1, "queue is text"},
		{`created_at == "now"`, 1, "created_at is a time"},
		{`created_at > "yesterday"`, 15, `"yesterday" is not a time`},
		{`created_at > now-1x`, 14, `"now-1x": not a duration`},
		{`command matches "(["`, 18, "not a regular expression"},
		{`"x" < priority`, 5, "put the field first"},
		{`metadata > "x"`, 1, "metadata values are text"},
		{`metadata.tenant > "x"`, 17, "compares a number or time field"},
		{`metadata["tenant"] >= "x"`, 20, "compares a number or time field"},
		{`metadata == "x"`, 1, `"k" in metadata`},
		{`metadata.a.b == "x"`, 1, "without fields"},
		{`id.x == "y"`, 1, `id has no field "x"`},
		{`priority/zz == 3`, 1, `unknown field "priority/zz"`},
		{`any metadata as k { k == "x" }`, 1, "any and all are not supported"},
		{`queue == "é" and staus == 1`, 18, `unknown field "staus"`},
		{`status == "a\"b"`, 11, "string"},
		{strings.Repeat(`queue == a or `, 32) + `queue == b`, 0, "more than 32 terms"},
		{`queue == "` + strings.Repeat("x", jobfilter.MaxLength) + `"`, 0, "at most 2048"},
		{strings.Repeat("(", 40) + `queue == a` + strings.Repeat(")", 40), 4, "parentheses nested deeper than 3"},
		{`(queue == a) and ((b == c or (d == e and (f == g))))`, 42, "parentheses nested deeper than 3"},
		{strings.Repeat(`((( queue == b or queue == c))) and `, 15) + `queue == d`, 0, "too complex to parse"},
	}
	for _, c := range cases {
		t.Run(c.filter[:min(len(c.filter), 40)], func(t *testing.T) {
			_, err := jobfilter.Compile(c.filter, ns(now))
			var fe *jobfilter.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Compile = %v, want a *jobfilter.Error", err)
			}
			if fe.Column() != c.col || !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q (column %d), want column %d and %q", err, fe.Column(), c.col, c.says)
			}
		})
	}
}

// TestFilterTerms: the terms are the equalities and created_at ranges of
// the top-level conjunction, and nothing under or / not.
func TestFilterTerms(t *testing.T) {
	cases := []struct {
		filter string
		want   []jobfilter.Term
	}{
		{`status == failed and queue == emails and last_error contains "x"`, []jobfilter.Term{
			{Field: jobfilter.FieldStatus, Value: "failed"}, {Field: jobfilter.FieldQueue, Value: "emails"}}},
		{`status == scheduled`, []jobfilter.Term{{Field: jobfilter.FieldStatus, Value: "pending"}}},
		{`(type == t and concurrency_key == k) and (schedule == s and metadata["tenant"] == acme)`, []jobfilter.Term{
			{Field: jobfilter.FieldType, Value: "t"}, {Field: jobfilter.FieldConcurrencyKey, Value: "k"},
			{Field: jobfilter.FieldSchedule, Value: "s"}, {Field: jobfilter.FieldMetadata, Key: "tenant", Value: "acme"}}},
		{`created_at >= 2026-11-01 and queue == q and created_at < now`, []jobfilter.Term{
			{Field: jobfilter.FieldQueue, Value: "q"},
			{Field: jobfilter.FieldCreated, From: ns(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)), To: ns(now)}}},
		{`created_at > now`, []jobfilter.Term{{Field: jobfilter.FieldCreated, From: ns(now) + 1, To: math.MaxInt64}}},
		{`status == failed or queue == emails`, nil},
		{`not status == failed`, nil},
		{`status != failed and queue contains e`, nil},
	}
	for _, c := range cases {
		t.Run(c.filter, func(t *testing.T) {
			f, err := jobfilter.Compile(c.filter, ns(now))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Terms(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Terms() = %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestAndEqual: Equal builds what `field == value` compiles to, for any
// value (quotes included), and And joins filters and their terms.
func TestAndEqual(t *testing.T) {
	j := &store.Job{Queue: `a"b` + "`", Status: store.StatusDone, Metadata: map[string]string{"k": "v"}}
	q, err := jobfilter.Equal("queue", j.Queue, ns(now))
	if err != nil {
		t.Fatal(err)
	}
	m, err := jobfilter.Equal("metadata.k", "v", ns(now))
	if err != nil {
		t.Fatal(err)
	}
	text, err := jobfilter.Compile(`status == done`, ns(now))
	if err != nil {
		t.Fatal(err)
	}
	f := jobfilter.And(q, nil, m, &jobfilter.Filter{}, text)
	if !f.Match(j) {
		t.Error("the conjunction refuses a job that meets every part")
	}
	j.Metadata["k"] = "w"
	if f.Match(j) {
		t.Error("the conjunction keeps a job that fails one part")
	}
	want := []jobfilter.Term{{Field: jobfilter.FieldQueue, Value: j.Queue}, {Field: jobfilter.FieldMetadata, Key: "k", Value: "v"}, {Field: jobfilter.FieldStatus, Value: "done"}}
	if got := f.Terms(); !reflect.DeepEqual(got, want) {
		t.Errorf("Terms() = %+v, want %+v", got, want)
	}
	if _, err := jobfilter.Equal("status", "nope", ns(now)); err == nil || !strings.Contains(err.Error(), "not one of") {
		t.Errorf("Equal(status, nope) = %v, want an error naming the statuses", err)
	}
	if !jobfilter.And().Match(j) || !(*jobfilter.Filter)(nil).Match(j) {
		t.Error("an empty filter refuses a job")
	}
}

// BenchmarkMatch measures a filter's evaluation per job: an indexable
// conjunction with a text match, against a job it keeps.
func BenchmarkMatch(b *testing.B) {
	f, err := jobfilter.Compile(`status == failed and queue == "emails" and metadata["tenant"] == acme and last_error contains "timeout" and created_at > now-1h`, ns(now))
	if err != nil {
		b.Fatal(err)
	}
	j := jobs()["failedEmail"]
	b.ReportAllocs()
	for b.Loop() {
		if !f.Match(j) {
			b.Fatal("no match")
		}
	}
}
