package clustertest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/clustertest"
	"github.com/workron/workron/internal/node"
	"github.com/workron/workron/internal/traceparent"
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
	hr, err := http.NewRequest(http.MethodPost, url+"/jobs", strings.NewReader(body))
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
		t.Fatalf("submit: %s", r)
	}
	return decode[wire.Job](t, r)
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
// records no span: see internal/node's test) still keeps a job's caller's
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
