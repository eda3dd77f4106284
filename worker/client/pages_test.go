package client_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// TestListsFollowPages: Queues and Schedules follow GET /queues' and GET
// /schedules' pages to the last, asking for pages of 1000, and QueueList
// and ScheduleList read one page, sending its limit and cursor.
func TestListsFollowPages(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	var asked []string
	// page serves names two at a time (the cursor is the last name given).
	page := func(r *http.Request) ([]string, string) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		i := 0
		if c := r.URL.Query().Get("cursor"); c != "" {
			i = slices.Index(names, c) + 1
		}
		n := 2
		if l, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && l < n {
			n = l
		}
		out := names[i:min(i+n, len(names))]
		if i+len(out) < len(names) {
			return out, out[len(out)-1]
		}
		return out, ""
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /queues", func(w http.ResponseWriter, r *http.Request) {
		got, next := page(r)
		out := wire.QueueList{NextCursor: next, Queues: []wire.Queue{}}
		for _, n := range got {
			out.Queues = append(out.Queues, wire.Queue{Name: n})
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /schedules", func(w http.ResponseWriter, r *http.Request) {
		got, next := page(r)
		out := wire.ScheduleList{NextCursor: next, Schedules: []wire.Schedule{}}
		for _, n := range got {
			out.Schedules = append(out.Schedules, wire.Schedule{Name: n})
		}
		writeJSON(w, http.StatusOK, out)
	})
	cl := newClient(t, nil, newServer(t, mux).URL)
	ctx := t.Context()

	qs, err := cl.Queues(ctx)
	if err != nil || len(qs) != len(names) || qs[4].Name != "e" {
		t.Fatalf("Queues = %+v, %v; want all %d", qs, err, len(names))
	}
	scs, err := cl.Schedules(ctx)
	if err != nil || len(scs) != len(names) || scs[4].Name != "e" {
		t.Fatalf("Schedules = %+v, %v; want all %d", scs, err, len(names))
	}
	want := []string{"/queues?limit=1000", "/queues?cursor=b&limit=1000", "/queues?cursor=d&limit=1000",
		"/schedules?limit=1000", "/schedules?cursor=b&limit=1000", "/schedules?cursor=d&limit=1000"}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("asked %v, want %v", asked, want)
	}
	ql, err := cl.QueueList(ctx, client.Page{Limit: 1, Cursor: "c"})
	if err != nil || len(ql.Queues) != 1 || ql.Queues[0].Name != "d" || ql.NextCursor != "d" {
		t.Fatalf("QueueList(1 after c) = %+v, %v", ql, err)
	}
	sl, err := cl.ScheduleList(ctx, client.Page{Cursor: "d"})
	if err != nil || len(sl.Schedules) != 1 || sl.Schedules[0].Name != "e" || sl.NextCursor != "" {
		t.Fatalf("ScheduleList(after d) = %+v, %v", sl, err)
	}
}
