package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// setNode records a member's addresses in the state, as a join does.
func setNode(t *testing.T, n *loneNode, id, httpURL string) {
	t.Helper()
	if _, err := n.Propose(t.Context(), fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: id, HTTP: httpURL, Raft: "127.0.0.1:2"}}); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownFieldsAreWarnedAbout: a misspelled or unknown field is still
// accepted (older and newer clients keep working), but the reply names it
// in "warnings"; a body with none has no warnings.
func TestUnknownFieldsAreWarnedAbout(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	var job wire.Job
	if code, werr := env.do(http.MethodPost, "/jobs", `{"command":"echo","priorty":5,"Queue":"q","backoff":{"bse":"1s"}}`, &job); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	want := []string{`unknown field "priorty"`, `unknown field "backoff.bse"`}
	if !slices.Equal(job.Warnings, want) || job.Priority != 0 || job.Queue != "q" {
		t.Errorf("submit: warnings %q, priority %d, queue %q; want %q, 0 and q (field names match as encoding/json does, case aside)", job.Warnings, job.Priority, job.Queue, want)
	}
	var clean wire.Job
	env.do(http.MethodPost, "/jobs", `{"command":"echo"}`, &clean)
	if clean.Warnings != nil {
		t.Errorf("a submit without unknown fields got warnings %q", clean.Warnings)
	}
	var list wire.JobList
	if code, werr := env.do(http.MethodPost, "/jobs/batch", `{"jobs":[{"command":"a"},{"command":"b","dependson":["$0"]}],"extra":1}`, &list); code != http.StatusCreated {
		t.Fatalf("batch: %d %+v", code, werr)
	}
	if want := []string{`unknown field "jobs[1].dependson"`, `unknown field "extra"`}; !slices.Equal(list.Warnings, want) {
		t.Errorf("batch warnings %q, want %q", list.Warnings, want)
	}
	var gang wire.GangSubmitResponse
	if code, werr := env.do(http.MethodPost, "/jobs", `{"command":"x","gang_size":2,"gnag":1}`, &gang); code != http.StatusCreated {
		t.Fatalf("gang: %d %+v", code, werr)
	}
	if want := []string{`unknown field "gnag"`}; !slices.Equal(gang.Warnings, want) {
		t.Errorf("gang warnings %q, want %q", gang.Warnings, want)
	}
	var sc wire.Schedule
	if code, werr := env.do(http.MethodPost, "/schedules", `{"name":"s","cron":"@daily","job":{"command":"x","priorty":1},"overlp":"skip"}`, &sc); code != http.StatusCreated {
		t.Fatalf("create schedule: %d %+v", code, werr)
	}
	if want := []string{`unknown field "job.priorty"`, `unknown field "overlp"`}; !slices.Equal(sc.Warnings, want) {
		t.Errorf("schedule warnings %q, want %q", sc.Warnings, want)
	}
	if code, _ := env.do(http.MethodPut, "/schedules/s", `{"cronn":"@hourly"}`, &sc); code != http.StatusOK || !slices.Equal(sc.Warnings, []string{`unknown field "cronn"`}) {
		t.Errorf("update schedule: %d, warnings %q", code, sc.Warnings)
	}
	var got wire.Schedule
	env.do(http.MethodGet, "/schedules/s", nil, &got)
	if got.Warnings != nil {
		t.Errorf("GET repeats warnings: %q", got.Warnings)
	}
}

// TestScheduleUpdateChangesOnlyWhatItNames: PUT /schedules/{name} keeps
// every field its body leaves out (paused, overlap, the job's command and
// env), replaces the ones it names (a job's env whole), and the omitted
// cron stays.
func TestScheduleUpdateChangesOnlyWhatItNames(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	env.create(wire.ScheduleRequest{Name: "nightly", Cron: "0 2 * * *", Overlap: "skip", Catchup: "all", Timezone: "Europe/Paris",
		Job: wire.SubmitRequest{Command: "backup", Queue: "ops", Env: map[string]string{"A": "1", "B": "2"}, Tags: []string{"ssd"}}})
	if code, werr := env.do(http.MethodPost, "/schedules/nightly/pause", nil, nil); code != http.StatusOK {
		t.Fatalf("pause: %d %+v", code, werr)
	}
	var sc wire.Schedule
	if code, werr := env.do(http.MethodPut, "/schedules/nightly", `{"cron":"0 3 * * *","job":{"priority":4,"env":{"C":"3"}}}`, &sc); code != http.StatusOK {
		t.Fatalf("update: %d %+v", code, werr)
	}
	switch {
	case sc.Cron != "0 3 * * *" || sc.Job.Priority != 4:
		t.Errorf("the named fields did not change: cron %q, priority %d", sc.Cron, sc.Job.Priority)
	case !sc.Paused || sc.Overlap != "skip" || sc.Catchup != "all" || sc.Timezone != "Europe/Paris":
		t.Errorf("fields left out changed: paused %v, overlap %q, catchup %q, timezone %q", sc.Paused, sc.Overlap, sc.Catchup, sc.Timezone)
	case sc.Job.Command != "backup" || sc.Job.Queue != "ops" || !slices.Equal(sc.Job.Tags, []string{"ssd"}):
		t.Errorf("the job's fields left out changed: %+v", sc.Job)
	case len(sc.Job.Env) != 1 || sc.Job.Env["C"] != "3":
		t.Errorf("env named in the update: got %v, want it replaced whole by {C:3}", sc.Job.Env)
	}
	// Fields named empty are cleared: env {}, queue "", timeout "",
	// max_attempts null (back to the default).
	sc = wire.Schedule{} // a reply decodes into a fresh value (json merges maps)
	if code, werr := env.do(http.MethodPut, "/schedules/nightly", `{"job":{"env":{},"queue":"","timeout":"","max_attempts":null,"payload":null}}`, &sc); code != http.StatusOK {
		t.Fatalf("clearing update: %d %+v", code, werr)
	}
	if len(sc.Job.Env) != 0 || sc.Job.Queue != "default" || sc.Job.Timeout != "" || sc.Job.Command != "backup" || sc.Job.Priority != 4 {
		t.Errorf("clearing update: job %+v, want env, queue and timeout cleared, command and priority kept", sc.Job)
	}
	// Switching to a typed job drops the command, and back.
	sc = wire.Schedule{}
	if code, werr := env.do(http.MethodPut, "/schedules/nightly", `{"job":{"type":"report","payload":{"n":1}}}`, &sc); code != http.StatusOK || sc.Job.Command != "" || sc.Job.Type != "report" {
		t.Fatalf("to a typed job: %d %+v %+v", code, werr, sc.Job)
	}
	sc = wire.Schedule{}
	if code, werr := env.do(http.MethodPut, "/schedules/nightly", `{"job":{"command":"backup"}}`, &sc); code != http.StatusOK || sc.Job.Type != "" || sc.Job.Payload != nil {
		t.Fatalf("back to a command: %d %+v %+v", code, werr, sc.Job)
	}
	// An empty body changes nothing; paused:false resumes.
	if code, _ := env.do(http.MethodPut, "/schedules/nightly", `{"paused":false}`, &sc); code != http.StatusOK || sc.Paused || sc.Cron != "0 3 * * *" {
		t.Errorf("paused:false: %d, paused %v, cron %q", code, sc.Paused, sc.Cron)
	}
}

// TestBatchShapes: a batch's jobs decode whatever objects they hold, a
// null job is refused as a job without a command (naming its index), and
// an empty or missing list is refused.
func TestBatchShapes(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	var list wire.JobList
	body := `{"jobs":[{"command":"a","env":{"A":"1"},"backoff":{"base":"1s"},"metadata":{"k":"v"}},{"command":"b"},{"command":"c"}]}`
	if code, werr := env.do(http.MethodPost, "/jobs/batch", body, &list); code != http.StatusCreated {
		t.Fatalf("batch with nested objects: %d %+v", code, werr)
	}
	if len(list.Jobs) != 3 || list.Jobs[0].Env["A"] != "1" || list.Jobs[0].Metadata["k"] != "v" || list.Jobs[2].Command != "c" {
		t.Errorf("batch with nested objects: %+v", list.Jobs)
	}
	for body, want := range map[string]string{
		`{"jobs":[null]}`:                      "jobs[0].command",
		`{"jobs":[{"command":"a"},null]}`:      "jobs[1].command",
		`{"jobs":[null,null,{"command":"a"}]}`: "jobs[0].command",
		`{"jobs":[]}`:                          "must hold at least one job",
		`{"jobs":null}`:                        "must hold at least one job",
		`{}`:                                   "must hold at least one job",
		``:                                     "must hold at least one job",
	} {
		code, werr := env.do(http.MethodPost, "/jobs/batch", body, nil)
		if code != http.StatusBadRequest || !strings.Contains(werr.Error, want) {
			t.Errorf("%s: %d %q, want 400 saying %s", body, code, werr.Error, want)
		}
	}
}

// TestBatchReferences: a batch job that names itself is told so, and "$N"
// has one spelling ($00 and $+0 are refused, not read as $0).
func TestBatchReferences(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	for body, want := range map[string]string{
		`{"jobs":[{"command":"a","depends_on":["$0"]}]}`:                  `"$0" is this job itself`,
		`{"jobs":[{"command":"a"},{"command":"b","depends_on":["$1"]}]}`:  `"$1" is this job itself`,
		`{"jobs":[{"command":"a"},{"command":"b","depends_on":["$00"]}]}`: `"$00" does not name another job`,
		`{"jobs":[{"command":"a"},{"command":"b","depends_on":["$+0"]}]}`: `"$+0" does not name another job`,
		`{"jobs":[{"command":"a"},{"command":"b","depends_on":["$2"]}]}`:  `"$2" does not name another job of this batch ($0 to $1)`,
		`{"jobs":[{"command":"a"},{"command":"b","depends_on":["$-1"]}]}`: `"$-1" does not name another job`,
		`{"jobs":[{"command":"a"},{"command":"b","depends_on":["$ 0"]}]}`: `"$ 0" does not name another job`,
	} {
		code, werr := env.do(http.MethodPost, "/jobs/batch", body, nil)
		if code != http.StatusBadRequest || !strings.Contains(werr.Error, want) || strings.Contains(werr.Error, "use POST /jobs/batch") {
			t.Errorf("%s: %d %q, want 400 saying %s", body, code, werr.Error, want)
		}
	}
	if code, werr := env.do(http.MethodPost, "/jobs", `{"command":"a","depends_on":["$0"]}`, nil); code != http.StatusBadRequest || !strings.Contains(werr.Error, "use POST /jobs/batch") {
		t.Errorf("POST /jobs with $0: %d %q, want the hint to use a batch", code, werr.Error)
	}
	if code, werr := env.do(http.MethodPost, "/jobs/batch", `{"jobs":[{"command":"a"},{"command":"b","depends_on":["$0"]}]}`, nil); code != http.StatusCreated {
		t.Errorf("a good batch: %d %+v", code, werr)
	}
}

// TestGetQueue: GET /queues/{name} shows one queue, counts {} (not null)
// when it has none of a status; an unknown queue is 404. The pause reply
// shows the counts too.
func TestGetQueue(t *testing.T) {
	env := newSchedEnv(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	env.do(http.MethodPost, "/jobs", `{"command":"a","queue":"q"}`, nil)
	rec := httptest.NewRecorder()
	env.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/queues/q", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"counts":{"pending":1}`) {
		t.Errorf("GET /queues/q: %d %s", rec.Code, rec.Body)
	}
	if code, werr := env.do(http.MethodGet, "/queues/nope", nil, nil); code != http.StatusNotFound || werr.Code != wire.CodeNotFound {
		t.Errorf("GET /queues/nope: %d %+v, want 404", code, werr)
	}
	rec = httptest.NewRecorder()
	env.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/queues/q/pause", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"paused":true,"counts":{"pending":1}`) {
		t.Errorf("pause: %d %s", rec.Code, rec.Body)
	}
	// A queue whose jobs are all gone (purged) shows counts {}.
	q := queueWire(fsm.QueueStats{Name: "empty"}, nil, 0)
	if q.Counts == nil {
		t.Error("an empty queue's counts are null")
	}
}

// TestRequestIDOnceThroughAFollower: a request a follower forwards carries
// the client's X-Request-ID back once, not once from each node.
func TestRequestIDOnceThroughAFollower(t *testing.T) {
	tap := &leaderTap{}
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headerRequestID, r.Header.Get(headerRequestID)) // as withRequestID does
		tap.ServeHTTP(w, r)
	}))
	t.Cleanup(leader.Close)
	var node *steppingNode
	env := newSchedEnv(t, time.Now(), func(cfg *Config) {
		node = &steppingNode{loneNode: cfg.Node.(*loneNode)}
		node.deposed.Store(true)
		cfg.Node = node
	})
	t.Cleanup(env.srv.proxy.Transport.(*http.Transport).CloseIdleConnections)
	setNode(t, node.loneNode, "n2", leader.URL)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/jobs", strings.NewReader(`{"command":"x"}`))
	req.Header.Set(headerRequestID, "abc123")
	env.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("forwarded submit: %d %s", rec.Code, rec.Body)
	}
	if got := rec.Result().Header.Values(headerRequestID); !slices.Equal(got, []string{"abc123"}) {
		t.Errorf("X-Request-ID in the reply: %q, want [abc123]", got)
	}
}

// Test503IsNoWarning: a 503 (no leader yet: every start has some) is
// logged below warning level; other 5xx replies are warnings.
func Test503IsNoWarning(t *testing.T) {
	var logs bytes.Buffer
	env := newSchedEnv(t, time.Now(), func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		cfg.LeaderWait = 0
		node := &steppingNode{loneNode: cfg.Node.(*loneNode)}
		node.deposed.Store(true) // the leader n2 has no known address: 503
		cfg.Node = node
	})
	if code, _ := env.do(http.MethodPost, "/workers/register", `{"id":"w1"}`, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("register without a reachable leader: %d, want 503", code)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a 503 was logged as a warning:\n%s", logs.String())
	}
}
