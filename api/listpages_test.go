package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/workron/workron/api/wire"
)

// pageThrough follows a list's pages of limit items from path, and
// returns every name listed, in order. It fails the test on a page over
// limit, a name listed twice or paging that does not end.
func pageThrough(t *testing.T, e *schedEnv, path string, limit int, names func(body []byte) ([]string, string)) []string {
	t.Helper()
	var all []string
	seen := make(map[string]bool)
	cursor := ""
	for pages := 0; ; pages++ {
		p := fmt.Sprintf("%s?limit=%d", path, limit)
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		var raw rawBody
		if code, werr := e.do(http.MethodGet, p, nil, &raw); code != http.StatusOK {
			t.Fatalf("GET %s: %d %+v", p, code, werr)
		}
		got, next := names(raw)
		if len(got) > limit {
			t.Fatalf("GET %s: %d items, limit %d", p, len(got), limit)
		}
		for _, n := range got {
			if seen[n] {
				t.Fatalf("%s listed twice", n)
			}
			seen[n] = true
		}
		all = append(all, got...)
		if cursor = next; cursor == "" {
			return all
		}
		if pages > 10000 {
			t.Fatal("paging does not end")
		}
	}
}

func decodeRaw(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("reply %s: %v", b, err)
	}
}

// rawBody keeps a reply's JSON as it came.
type rawBody []byte

func (b *rawBody) UnmarshalJSON(v []byte) error { *b = append((*b)[:0], v...); return nil }

// TestQueueListPages: GET /queues answers a page at a time, by name:
// without limit the first DefaultPageLimit queues and a next_cursor (an
// old client gets a bounded reply), and paging lists every queue once,
// those that only have limits or a pause included.
func TestQueueListPages(t *testing.T) {
	e := newSchedEnv(t, schedT0, nil)
	const n = 230
	var want []string
	for i := range n {
		q := fmt.Sprintf("q%03d", i)
		want = append(want, q)
		switch i % 3 {
		case 0:
			e.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", Queue: q}, nil)
		case 1:
			e.do(http.MethodPost, "/queues/"+q+"/pause", nil, nil)
		default:
			e.do(http.MethodPut, "/queues/"+q, `{"concurrency":2}`, nil)
		}
	}
	var first wire.QueueList
	if code, werr := e.do(http.MethodGet, "/queues", nil, &first); code != http.StatusOK {
		t.Fatalf("queues: %d %+v", code, werr)
	}
	if len(first.Queues) != DefaultPageLimit || first.NextCursor == "" {
		t.Fatalf("no limit: %d queues, next_cursor %q; want %d and a cursor", len(first.Queues), first.NextCursor, DefaultPageLimit)
	}
	got := pageThrough(t, e, "/queues", 70, func(b []byte) ([]string, string) {
		var l wire.QueueList
		decodeRaw(t, b, &l)
		var names []string
		for _, q := range l.Queues {
			names = append(names, q.Name)
			if i := len(names) - 1; q.Name == "q001" && !q.Paused || q.Name == "q002" && q.Limits == nil || q.Name == "q000" && q.Counts["pending"] != 1 {
				t.Errorf("queue %d %+v lost its details", i, q)
			}
		}
		return names, l.NextCursor
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged %d queues, want %d in name order", len(got), len(want))
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "cursor=%21%21"} {
		if code, werr := e.do(http.MethodGet, "/queues?"+q, nil, nil); code != http.StatusBadRequest || werr.Code != wire.CodeInvalid {
			t.Errorf("GET /queues?%s: %d %+v, want 400 invalid", q, code, werr)
		}
	}
}

// TestScheduleListPages: GET /schedules answers a page at a time, by
// name, as GET /queues does.
func TestScheduleListPages(t *testing.T) {
	e := newSchedEnv(t, schedT0, nil)
	const n = 230
	var want []string
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		want = append(want, name)
		e.create(wire.ScheduleRequest{Name: name, Cron: "@daily", Job: wire.SubmitRequest{Command: "x"}})
	}
	var first wire.ScheduleList
	if code, werr := e.do(http.MethodGet, "/schedules", nil, &first); code != http.StatusOK {
		t.Fatalf("schedules: %d %+v", code, werr)
	}
	if len(first.Schedules) != DefaultPageLimit || first.NextCursor == "" {
		t.Fatalf("no limit: %d schedules, next_cursor %q; want %d and a cursor", len(first.Schedules), first.NextCursor, DefaultPageLimit)
	}
	got := pageThrough(t, e, "/schedules", 70, func(b []byte) ([]string, string) {
		var l wire.ScheduleList
		decodeRaw(t, b, &l)
		var names []string
		for _, sc := range l.Schedules {
			names = append(names, sc.Name)
		}
		return names, l.NextCursor
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged %d schedules, want %d in name order", len(got), len(want))
	}
	for _, q := range []string{"limit=0", "limit=1001", "cursor=%21%21"} {
		if code, werr := e.do(http.MethodGet, "/schedules?"+q, nil, nil); code != http.StatusBadRequest || werr.Code != wire.CodeInvalid {
			t.Errorf("GET /schedules?%s: %d %+v, want 400 invalid", q, code, werr)
		}
	}
}

// TestQueuePausesListBounded: a queue with many keys rate-limited lists
// MaxQueuePausesListed of their pauses in GET /queues and GET
// /queues/{name}, and says how many more are in force.
func TestQueuePausesListBounded(t *testing.T) {
	e := newSchedEnv(t, schedT0, nil)
	const n = MaxQueuePausesListed + 7
	for i := range n {
		e.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", Queue: "api", ConcurrencyKey: fmt.Sprintf("tenant-%02d", i)}, nil)
	}
	var res wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: "w", Queues: []string{"api"}, Max: n}, &res); code != http.StatusOK || len(res.Jobs) != n {
		t.Fatalf("claim: %d %+v, %d jobs", code, werr, len(res.Jobs))
	}
	for _, j := range res.Jobs {
		if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, Error: "429", RateLimitedFor: "1m"}, nil); code != http.StatusOK {
			t.Fatalf("rate-limited report: %d %+v", code, werr)
		}
	}
	var list wire.QueueList
	var one wire.Queue
	e.do(http.MethodGet, "/queues", nil, &list)
	e.do(http.MethodGet, "/queues/api", nil, &one)
	if len(list.Queues) != 1 {
		t.Fatalf("queues %+v, want api alone", list.Queues)
	}
	for _, q := range []wire.Queue{list.Queues[0], one} {
		if q.Limits == nil || len(q.Limits.Paused) != MaxQueuePausesListed || q.Limits.PausedMore != n-MaxQueuePausesListed {
			t.Fatalf("queue %s lists its pauses as %+v, want %d and %d more", q.Name, q.Limits, MaxQueuePausesListed, n-MaxQueuePausesListed)
		}
	}
}
