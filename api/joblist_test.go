package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestJobFilters: GET /jobs?filter= and GET /jobs/count over 20 jobs, with
// scan budgets of 5 (a page) and 7 (a count): pages that run out of budget
// say so and how far they got, go on from their cursor without examining a
// job twice, and counts add up to the exact figure.
func TestJobFilters(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, start, func(c *Config) { c.ListScan, c.CountScan = 5, 7 })
	var ids []string // by submission: ids[i] is job i, oldest first
	for i := range 20 {
		e.clock.Set(start.Add(time.Duration(i) * time.Minute))
		req := wire.SubmitRequest{Command: fmt.Sprintf("echo %d", i), Queue: fmt.Sprintf("q%d", i%2), Priority: i}
		if i < 2 {
			req.Metadata = map[string]string{"tenant": "needle"}
		}
		if i >= 15 {
			later := start.Add(time.Hour)
			req.RunAt = &later // scheduled
		}
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs", req, &j); code != http.StatusCreated {
			t.Fatalf("submit %d: %d %+v", i, code, werr)
		}
		ids = append(ids, j.ID)
	}
	e.clock.Set(start.Add(30 * time.Minute))

	list := func(t *testing.T, query string) wire.JobList {
		t.Helper()
		var page wire.JobList
		if code, werr := e.do(http.MethodGet, "/jobs?"+query, nil, &page); code != http.StatusOK {
			t.Fatalf("GET /jobs?%s: %d %+v", query, code, werr)
		}
		return page
	}
	// all pages through a list and returns the ids and the jobs examined.
	all := func(t *testing.T, query string) (got []string, scanned, pages int) {
		t.Helper()
		cursor := ""
		for pages = 1; pages < 100; pages++ {
			q := query
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			page := list(t, q)
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			scanned += page.Scanned
			if page.NextCursor == "" {
				if page.Partial {
					t.Fatalf("the last page (%s) is marked partial", q)
				}
				return got, scanned, pages
			}
			cursor = page.NextCursor
		}
		t.Fatal("paging does not end")
		return nil, 0, 0
	}
	filter := func(expr string) string { return "filter=" + url.QueryEscape(expr) }

	t.Run("AnIndexedTermReadsOnlyItsMatches", func(t *testing.T) {
		// The two oldest of 20 jobs, behind more than a page's budget: the
		// metadata index (store/index.go) gives them at once.
		page := list(t, filter(`metadata["tenant"] == "needle"`)+"&limit=10")
		if want := []string{ids[1], ids[0]}; !slices.Equal(jobIDs(page.Jobs), want) || page.Partial || page.Scanned != 2 || page.NextCursor != "" {
			t.Fatalf("first page: %v, partial %v, scanned %d, cursor %q; want %v alone, 2 examined", jobIDs(page.Jobs), page.Partial, page.Scanned, page.NextCursor, want)
		}
	})

	// priority < 2 keeps the same two jobs, but no index serves it.
	t.Run("APageThatRunsOutOfBudgetSaysSoAndHowFarItGot", func(t *testing.T) {
		page := list(t, filter(`priority < 2`)+"&limit=10")
		if len(page.Jobs) != 0 || !page.Partial || page.Scanned != 5 || page.NextCursor == "" {
			t.Fatalf("first page: %d jobs, partial %v, scanned %d, cursor %q; want none, partial, 5 scanned and a cursor",
				len(page.Jobs), page.Partial, page.Scanned, page.NextCursor)
		}
		got, scanned, pages := all(t, filter(`priority < 2`)+"&limit=10")
		if want := []string{ids[1], ids[0]}; !slices.Equal(got, want) {
			t.Errorf("the pages hold %v, want %v", got, want)
		}
		if scanned != 20 || pages != 4 {
			t.Errorf("%d jobs examined over %d pages, want each of the 20 once over 4 pages", scanned, pages)
		}
	})

	// The even jobs, as queue q0 holds, but by their command: no index.
	evens := filter(`command matches "[02468]$"`)
	t.Run("APartialPageGoesOnPastTheLastJobItExamined", func(t *testing.T) {
		page := list(t, evens+"&limit=10")
		if len(page.Jobs) != 2 || !page.Partial || page.Scanned != 5 || page.NextCursor == "" {
			t.Fatalf("first page: %d jobs, partial %v, scanned %d; want jobs 18 and 16 of the 5 newest, partial", len(page.Jobs), page.Partial, page.Scanned)
		}
		got, scanned, _ := all(t, evens+"&limit=10")
		if len(got) != 10 || scanned != 20 {
			t.Errorf("%d jobs over %d examined, want the 10 of q0 with each of the 20 jobs examined once", len(got), scanned)
		}
	})

	t.Run("AFullPageIsNotPartial", func(t *testing.T) {
		page := list(t, "limit=3")
		if len(page.Jobs) != 3 || page.Partial || page.NextCursor == "" || page.Scanned != 3 {
			t.Fatalf("got %d jobs, partial %v, scanned %d, cursor %q; want 3, a full page of 3 examined, and a cursor",
				len(page.Jobs), page.Partial, page.Scanned, page.NextCursor)
		}
	})

	t.Run("TheLanguageAndTheOldParametersTogether", func(t *testing.T) {
		cases := []struct {
			query string
			want  []int // job numbers, newest first
		}{
			{filter(`priority >= 10 and priority < 13`), []int{12, 11, 10}},
			{filter(`status == "scheduled" and queue == q1`), []int{19, 17, 15}},
			{filter(`status == pending and command contains "1"`), []int{14, 13, 12, 11, 10, 1}},
			{filter(`created_at >= "2026-11-27T12:18:00Z"`) + "&status=scheduled", []int{19, 18}},
			{filter(`priority < 4`) + "&queue=q1&metadata.tenant=needle", []int{1}},
			{"status=pending&queue=q0&" + filter(`command matches "^echo [02]$"`), []int{2, 0}},
		}
		for _, c := range cases {
			var want []string
			for _, n := range c.want {
				want = append(want, ids[n])
			}
			if got, _, _ := all(t, c.query); !slices.Equal(got, want) {
				t.Errorf("GET /jobs?%s: %v, want %v", c.query, got, want)
			}
		}
	})

	t.Run("CountsAreExactOnceTheyGetToTheEnd", func(t *testing.T) {
		var c wire.JobCount
		q := "/jobs/count?" + evens
		if code, werr := e.do(http.MethodGet, q, nil, &c); code != http.StatusOK {
			t.Fatalf("GET %s: %d %+v", q, code, werr)
		}
		if c.Exact || c.Scanned != 7 || c.NextCursor == "" || c.Count != 3 {
			t.Fatalf("first count %+v, want 3 of q0 among the 7 newest, not exact, and a cursor", c)
		}
		total, byStatus, scanned := c.Count, c.ByStatus, c.Scanned
		for !c.Exact {
			next := q + "&cursor=" + c.NextCursor
			c = wire.JobCount{}
			if code, werr := e.do(http.MethodGet, next, nil, &c); code != http.StatusOK {
				t.Fatalf("GET %s: %d %+v", next, code, werr)
			}
			total, scanned = total+c.Count, scanned+c.Scanned
			for k, v := range c.ByStatus {
				byStatus[k] += v
			}
		}
		if total != 10 || scanned != 20 || byStatus["pending"] != 8 || byStatus["scheduled"] != 2 {
			t.Errorf("counted %d (%v) over %d jobs examined, want 10 (8 pending, 2 scheduled) over 20", total, byStatus, scanned)
		}
	})

	t.Run("AnIndexedCountIsExactAtOnce", func(t *testing.T) {
		var c wire.JobCount
		if code, werr := e.do(http.MethodGet, "/jobs/count?status=done", nil, &c); code != http.StatusOK {
			t.Fatalf("count: %d %+v", code, werr)
		}
		if !c.Exact || c.Count != 0 || c.Scanned != 0 || c.NextCursor != "" {
			t.Errorf("count of done jobs: %+v, want an exact 0 with nothing examined", c)
		}
	})

	t.Run("ABadFilterIsRefusedWithWhereAndWhat", func(t *testing.T) {
		cases := []struct{ query, field, says string }{
			{filter(`staus == "failed"`), "filter", `at column 1: unknown field "staus"`},
			{filter(`status = "failed"`), "filter", "at column 8: expected"},
			{filter(`queue == a and created_at > "soon"`), "filter", `at column 30: created_at: "soon" is not a time`},
			{filter(strings.Repeat("x", 3000)), "filter", "at most 2048"},
			{"status=nope", "status", `"nope" is not one of blocked, scheduled`},
			{filter("queue == a") + "&cursor=x", "cursor", "not a cursor"},
		}
		for _, c := range cases {
			for _, path := range []string{"/jobs?", "/jobs/count?"} {
				code, werr := e.do(http.MethodGet, path+c.query, nil, nil)
				if code != http.StatusBadRequest || werr.Code != "invalid" || !strings.HasPrefix(werr.Error, c.field+": ") || !strings.Contains(werr.Error, c.says) {
					t.Errorf("GET %s%s: %d %+v, want 400 invalid naming %s and saying %q", path, c.query, code, werr, c.field, c.says)
				}
			}
		}
	})
}
