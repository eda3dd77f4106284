package clustertest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/traceparent"
	"github.com/workron/workron/node"
	"github.com/workron/workron/worker"
)

// callerTrace is the trace of the client that submits, as its traceparent
// header gives it.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
	callerParent  = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// spanSet reads the spans of several in-memory exporters.
type spanSet []*tracetest.InMemoryExporter

func (s spanSet) all() tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, e := range s {
		out = append(out, e.GetSpans()...)
	}
	return out
}

// find waits for a span named name whose attribute key is value, and
// returns the spans so named.
func (s spanSet) find(tb testing.TB, name string, key attribute.Key, value string) []tracetest.SpanStub {
	tb.Helper()
	var found []tracetest.SpanStub
	clustertest.WaitFor(tb, 10*time.Second, func() error {
		found = found[:0]
		for _, sp := range s.all() {
			if sp.Name == name && attr(sp, key) == value {
				found = append(found, sp)
			}
		}
		if len(found) == 0 {
			return fmt.Errorf("no span %q with %s=%s among %s", name, key, value, names(s.all()))
		}
		return nil
	})
	return found
}

func attr(sp tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) string {
	var ns []string
	for _, sp := range spans {
		ns = append(ns, sp.Name)
	}
	return strings.Join(ns, ", ")
}

// tracedCluster is a 3-node cluster each of whose nodes exports its spans
// to an in-memory exporter of its own.
func tracedCluster(t *testing.T) (*clustertest.Cluster, spanSet) {
	exps := spanSet{tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()}
	c := newCluster(t, 3, clustertest.WithConfig(func(i int, nc *node.Config) {
		nc.Tracing.Exporter = exps[i]
	}))
	return c, exps
}

// submitTraced submits req to url with the traceparent header tp.
func submitTraced(t *testing.T, url, tp string, req wire.SubmitRequest) wire.Job {
	t.Helper()
	body := fmt.Sprintf(`{"command":%q,"type":%q,"queue":%q}`, req.Command, req.Type, req.Queue)
	return decode[wire.Job](t, postTraced(t, url+"/jobs", tp, body))
}

// postTraced posts body to url with the traceparent header tp and wants
// 201.
func postTraced(t *testing.T, url, tp, body string) reply {
	t.Helper()
	hr, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("traceparent", tp)
	resp, err := httpClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := reply{Status: resp.StatusCode}
	if r.Body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusCreated {
		t.Fatalf("POST %s: %s", url, r)
	}
	return r
}

func TestTraces(t *testing.T) {
	c, exps := tracedCluster(t)
	follower := c.Followers(t)[0]

	// The job's process prints its TRACEPARENT; a typed handler notes the
	// span its context carries and the job's TraceParent.
	workerSpans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(workerSpans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var (
		mu      sync.Mutex
		handled trace.SpanContext
		jobTP   string
	)
	startWorker(t, c, "traced", func(cfg *worker.Config) {
		cfg.Tracer = tp
		cfg.Queues = []string{"traced"}
	}, map[string]worker.HandlerFunc{"note": func(ctx context.Context, j *worker.Job) error {
		mu.Lock()
		defer mu.Unlock()
		handled, jobTP = trace.SpanContextFromContext(ctx), j.TraceParent
		return nil
	}})

	shell := submitTraced(t, c.URL(follower), callerParent, wire.SubmitRequest{Command: `echo "tp=$TRACEPARENT"`, Queue: "traced"})
	typed := submitTraced(t, c.URL(follower), callerParent, wire.SubmitRequest{Type: "note", Queue: "traced"})

	t.Run("TheSubmitSpansJoinTheCallersTraceThroughTheForward", func(t *testing.T) {
		leaderSpan := exps.find(t, "POST /jobs", "workron.job.id", shell.ID)[0]
		if got := leaderSpan.SpanContext.TraceID().String(); got != callerTraceID {
			t.Fatalf("the leader's submit span is in trace %s, want the caller's %s", got, callerTraceID)
		}
		if attr(leaderSpan, "workron.job.queue") != "traced" || attr(leaderSpan, "http.route") != "/jobs" || leaderSpan.SpanKind != trace.SpanKindServer {
			t.Errorf("the leader's submit span: attributes %v, kind %v", leaderSpan.Attributes, leaderSpan.SpanKind)
		}
		// Its parent is the follower's span of the same request, whose
		// parent is the caller's span.
		var fwd *tracetest.SpanStub
		for _, sp := range exps[follower].GetSpans() {
			if sp.SpanContext.SpanID() == leaderSpan.Parent.SpanID() {
				fwd = &sp
			}
		}
		if fwd == nil {
			t.Fatalf("the leader's submit span's parent %s is no span of the follower %s", leaderSpan.Parent.SpanID(), c.Node(follower).ID())
		}
		if fwd.Name != "POST /jobs" || fwd.Parent.SpanID().String() != callerSpanID || fwd.Parent.TraceID().String() != callerTraceID {
			t.Errorf("the follower's span %q has parent %s, want the caller's %s", fwd.Name, fwd.Parent.SpanID(), callerSpanID)
		}
		// The job's trace is the leader's submit span.
		want := "00-" + callerTraceID + "-" + leaderSpan.SpanContext.SpanID().String() + "-01"
		if shell.TraceParent != want {
			t.Errorf("the job's traceparent %q, want the submit span's %q", shell.TraceParent, want)
		}
	})

	done := waitJob(t, c.URL(0), shell.ID, 20*time.Second, statusIs(wire.StatusDone))
	waitJob(t, c.URL(0), typed.ID, 20*time.Second, statusIs(wire.StatusDone))
	jobSpan := trace.SpanContextFromContext(traceparent.Context(context.Background(), shell.TraceParent)).SpanID()

	t.Run("TheClaimIsASpanOfTheJobsTrace", func(t *testing.T) {
		claim := exps.find(t, "claim", "workron.job.id", shell.ID)[0]
		if claim.Parent.SpanID() != jobSpan || claim.SpanContext.TraceID().String() != callerTraceID {
			t.Errorf("claim span's parent %s in trace %s, want the job's %s in %s", claim.Parent.SpanID(), claim.SpanContext.TraceID(), jobSpan, callerTraceID)
		}
		if attr(claim, "workron.worker.id") != "traced" || attr(claim, "workron.job.attempt") != "1" {
			t.Errorf("claim span attributes %v", claim.Attributes)
		}
		if len(claim.Links) != 1 || !claim.Links[0].SpanContext.IsValid() {
			t.Errorf("claim span links %v, want the claim request's span", claim.Links)
		}
	})

	var run tracetest.SpanStub
	t.Run("TheWorkersRunSpanIsTheJobsChildAndTheProcessGetsIt", func(t *testing.T) {
		run = spanSet{workerSpans}.find(t, "run", "workron.job.id", shell.ID)[0]
		if run.Parent.SpanID() != jobSpan || run.SpanContext.TraceID().String() != callerTraceID {
			t.Errorf("run span's parent %s in trace %s, want the job's %s in %s", run.Parent.SpanID(), run.SpanContext.TraceID(), jobSpan, callerTraceID)
		}
		want := "tp=00-" + callerTraceID + "-" + run.SpanContext.SpanID().String() + "-01"
		if strings.TrimSpace(done.Output) != want {
			t.Errorf("the job's process printed %q, want %q (the run span)", done.Output, want)
		}
	})

	t.Run("TheReportIsTheRunsChild", func(t *testing.T) {
		rep := exps.find(t, "report", "workron.job.id", shell.ID)[0]
		if rep.Parent.SpanID() != run.SpanContext.SpanID() || attr(rep, "workron.job.status") != wire.StatusDone {
			t.Errorf("report span's parent %s, status %q; want the run span %s, done", rep.Parent.SpanID(), attr(rep, "workron.job.status"), run.SpanContext.SpanID())
		}
	})

	t.Run("ATypedHandlersContextCarriesTheRunSpan", func(t *testing.T) {
		typedRun := spanSet{workerSpans}.find(t, "run", "workron.job.id", typed.ID)[0]
		mu.Lock()
		defer mu.Unlock()
		if handled.SpanID() != typedRun.SpanContext.SpanID() || handled.TraceID().String() != callerTraceID {
			t.Errorf("the handler's context holds span %s of trace %s, want the run span %s of %s", handled.SpanID(), handled.TraceID(), typedRun.SpanContext.SpanID(), callerTraceID)
		}
		if want := traceparent.Of(trace.ContextWithSpanContext(context.Background(), handled)); jobTP != want {
			t.Errorf("Job.TraceParent %q, want %q", jobTP, want)
		}
	})

	t.Run("ARequestAboutAJobNamesIt", func(t *testing.T) {
		call(t, http.StatusOK, http.MethodGet, c.URL(c.Leader(t))+"/jobs/"+shell.ID, nil)
		get := exps.find(t, "GET /jobs/{id}", "workron.job.id", shell.ID)[0]
		if attr(get, "workron.job.queue") != "traced" || attr(get, "http.response.status_code") != "200" {
			t.Errorf("GET span attributes %v", get.Attributes)
		}
	})
}

// TestNoTracesWithoutAnExporter: a node not configured for traces (which
// records no span: see node's test) still keeps a job's caller's
// trace and hands it on.
func TestNoTracesWithoutAnExporter(t *testing.T) {
	c := newCluster(t, 1)
	job := submitTraced(t, c.URL(0), callerParent, wire.SubmitRequest{Command: `echo "tp=$TRACEPARENT"`, Queue: "plain"})
	if job.TraceParent != callerParent {
		t.Fatalf("the job's traceparent %q, want the caller's %q", job.TraceParent, callerParent)
	}
	startWorker(t, c, "plain", func(cfg *worker.Config) { cfg.Queues = []string{"plain"} }, nil)
	done := waitJob(t, c.URL(0), job.ID, 20*time.Second, statusIs(wire.StatusDone))
	if got := strings.TrimSpace(done.Output); got != "tp="+callerParent {
		t.Errorf("the job's process printed %q, want the caller's traceparent", got)
	}
	plain := submit(t, c.URL(0), wire.SubmitRequest{Command: "true", Queue: "none"})
	if plain.TraceParent != "" {
		t.Errorf("a job submitted without a trace has traceparent %q", plain.TraceParent)
	}
	// A gang and a triggered schedule run keep the caller's trace; a tick
	// the leader fires has none (no span to start one).
	g := decode[wire.GangSubmitResponse](t, postTraced(t, c.URL(0)+"/jobs", callerParent, `{"command":"true","queue":"none","gang_size":2}`))
	for _, id := range g.Tasks {
		if got := getJob(t, c.URL(0), id).TraceParent; got != callerParent {
			t.Errorf("gang task %s has traceparent %q, want the caller's", id, got)
		}
	}
	call(t, http.StatusCreated, http.MethodPost, c.URL(0)+"/schedules", `{"name":"tick","cron":"@every 1s","job":{"command":"true","queue":"none"}}`)
	if j := decode[wire.Job](t, postTraced(t, c.URL(0)+"/schedules/tick/trigger", callerParent, "")); j.TraceParent != callerParent {
		t.Errorf("a triggered run has traceparent %q, want the caller's", j.TraceParent)
	}
	var fired wire.Schedule
	clustertest.WaitFor(t, 10*time.Second, func() error {
		fired = decode[wire.Schedule](t, call(t, http.StatusOK, http.MethodGet, c.URL(0)+"/schedules/tick", nil))
		if !strings.HasPrefix(fired.LastJobID, "sched-tick-") || strings.Contains(fired.LastJobID, "manual") {
			return fmt.Errorf("schedule tick's last job %q, want a tick's", fired.LastJobID)
		}
		return nil
	})
	if got := getJob(t, c.URL(0), fired.LastJobID).TraceParent; got != "" {
		t.Errorf("a job a tick fired on a node that records no spans has traceparent %q, want none", got)
	}
	// An invalid traceparent is ignored, as W3C says, not refused.
	for _, bad := range []string{"garbage", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if j := submitTraced(t, c.URL(0), bad, wire.SubmitRequest{Command: "true", Queue: "none"}); j.TraceParent != "" {
			t.Errorf("a job submitted with traceparent %q keeps trace %q", bad, j.TraceParent)
		}
	}
}

// TestTraceOfAnExpiredLease: the reaper's end of an attempt is a span of
// the job's trace too.
func TestTraceOfAnExpiredLease(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	c := newCluster(t, 1, clustertest.WithLeaseTTL(300*time.Millisecond), clustertest.WithReapInterval(50*time.Millisecond),
		clustertest.WithConfig(func(_ int, nc *node.Config) { nc.Tracing.Exporter = exp }))
	job := submitTraced(t, c.URL(0), callerParent, wire.SubmitRequest{Command: "true", Queue: "lost"})
	cr := decode[wire.ClaimResponse](t, call(t, http.StatusOK, http.MethodPost, c.URL(0)+"/jobs/claim",
		wire.ClaimRequest{WorkerID: "gone", Queues: []string{"lost"}, Shell: true, Max: 1}))
	if len(cr.Jobs) != 1 || cr.Jobs[0].TraceParent != job.TraceParent {
		t.Fatalf("claimed %+v, want job %s with trace %s", cr.Jobs, job.ID, job.TraceParent)
	}
	expired := spanSet{exp}.find(t, "lease expired", "workron.job.id", job.ID)[0]
	jobSpan := trace.SpanContextFromContext(traceparent.Context(context.Background(), job.TraceParent))
	if expired.Parent.SpanID() != jobSpan.SpanID() || expired.SpanContext.TraceID().String() != callerTraceID {
		t.Errorf("lease expired span's parent %s in trace %s, want the job's %s in %s", expired.Parent.SpanID(), expired.SpanContext.TraceID(), jobSpan.SpanID(), callerTraceID)
	}
	if attr(expired, "workron.job.status") != wire.StatusPending || expired.Status.Code.String() != "Error" {
		t.Errorf("lease expired span: status attribute %q, span status %v; want pending (a retry), Error", attr(expired, "workron.job.status"), expired.Status)
	}
}

// TestTracesOfSchedulesAndGangs: a job a schedule fires is in a trace of
// its own, started by the leader's "schedule.fire" span, and every task of
// a gang is in the trace of the request that submitted the gang; each
// attempt's claim, run and report join that trace.
func TestTracesOfSchedulesAndGangs(t *testing.T) {
	exps := spanSet{tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()}
	c := newCluster(t, 3, clustertest.WithConfig(func(i int, nc *node.Config) {
		nc.Tracing.Exporter = exps[i]
		nc.Leader.Admission.Interval = 50 * time.Millisecond
	}))
	workerSpans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(workerSpans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, id := range []string{"tw1", "tw2"} {
		startWorker(t, c, id, func(cfg *worker.Config) {
			cfg.Tracer = tp
			cfg.Queues = []string{"sched", "gangs"}
		}, nil)
	}
	url := c.URL(c.Followers(t)[0])

	// attemptJoins checks that job id's claim and run are children of the
	// span its traceparent jobTP names, and its report the run's child.
	attemptJoins := func(t *testing.T, id, jobTP string) {
		t.Helper()
		job := trace.SpanContextFromContext(traceparent.Context(context.Background(), jobTP))
		claim := exps.find(t, "claim", "workron.job.id", id)[0]
		run := spanSet{workerSpans}.find(t, "run", "workron.job.id", id)[0]
		rep := exps.find(t, "report", "workron.job.id", id)[0]
		for _, sp := range []tracetest.SpanStub{claim, run} {
			if sp.Parent.SpanID() != job.SpanID() || sp.SpanContext.TraceID() != job.TraceID() {
				t.Errorf("job %s: %s span's parent %s in trace %s, want the job's %s in %s", id, sp.Name, sp.Parent.SpanID(), sp.SpanContext.TraceID(), job.SpanID(), job.TraceID())
			}
		}
		if rep.Parent.SpanID() != run.SpanContext.SpanID() || rep.SpanContext.TraceID() != job.TraceID() {
			t.Errorf("job %s: report span's parent %s, want the run span %s", id, rep.Parent.SpanID(), run.SpanContext.SpanID())
		}
	}

	t.Run("AFiredJobIsInTheTraceOfItsFire", func(t *testing.T) {
		call(t, http.StatusCreated, http.MethodPost, url+"/schedules", `{"name":"tick","cron":"@every 1s","job":{"command":"true","queue":"sched"}}`)
		fire := exps.find(t, "schedule.fire", "workron.schedule.name", "tick")[0]
		call(t, http.StatusNoContent, http.MethodDelete, url+"/schedules/tick", nil)
		id := attr(fire, "workron.job.id")
		if !strings.HasPrefix(id, "sched-tick-") || attr(fire, "workron.job.queue") != "sched" || attr(fire, "workron.schedule.fired") != "true" {
			t.Errorf("schedule.fire span attributes %v", fire.Attributes)
		}
		if fire.Parent.IsValid() {
			t.Errorf("schedule.fire span has parent %s, want a trace of its own", fire.Parent.SpanID())
		}
		j := waitJob(t, url, id, 20*time.Second, statusIs(wire.StatusDone))
		if want := "00-" + fire.SpanContext.TraceID().String() + "-" + fire.SpanContext.SpanID().String() + "-01"; j.TraceParent != want {
			t.Fatalf("fired job %s has traceparent %q, want its fire's %q", id, j.TraceParent, want)
		}
		attemptJoins(t, id, j.TraceParent)
	})

	t.Run("EveryTaskOfAGangIsInTheTraceOfItsSubmit", func(t *testing.T) {
		g := decode[wire.GangSubmitResponse](t, postTraced(t, url+"/jobs", callerParent, `{"command":"true","queue":"gangs","gang_size":2}`))
		var gangTP string
		for _, id := range g.Tasks {
			j := waitJob(t, url, id, 20*time.Second, statusIs(wire.StatusDone))
			if gangTP == "" {
				gangTP = j.TraceParent
			}
			if j.TraceParent == "" || j.TraceParent != gangTP || traceparent.TraceID(j.TraceParent) != callerTraceID {
				t.Fatalf("task %s has traceparent %q, want the gang's %q in the caller's trace %s", id, j.TraceParent, gangTP, callerTraceID)
			}
			attemptJoins(t, id, j.TraceParent)
		}
		// The tasks' trace is the leader's span of the submit.
		submit := exps.find(t, "POST /jobs", "workron.job.count", "2")
		spanID := trace.SpanContextFromContext(traceparent.Context(context.Background(), gangTP)).SpanID()
		if !slices.ContainsFunc(submit, func(sp tracetest.SpanStub) bool { return sp.SpanContext.SpanID() == spanID }) {
			t.Errorf("the gang's trace %s is no POST /jobs span of two tasks", gangTP)
		}
	})
}
