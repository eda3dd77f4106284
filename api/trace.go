package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/traceparent"
	"github.com/workron/workron/store"
)

// This file holds the node's traces (OpenTelemetry), all of them written
// only when Config.Tracer is set:
//
//   - a server span per request, named by its route ("POST /jobs/{id}/done"),
//     the child of the request's traceparent header; a follower forwards
//     its span's context to the leader, whose span is then its child;
//   - in each job's trace (store.Job.TraceParent): a "claim" span per
//     attempt, from when the job could run to its claim (its wait), and a
//     "report" span per attempt's end, the child of the worker's run span
//     when the report names it (wire.ReportRequest.TraceParent);
//   - a "schedule.fire" span per tick the leader's scheduler fires, the
//     root of a trace of its own, which the fired job stores (TraceFire).
//
// What a job submitted over the API stores as its trace does not depend
// on Config.Tracer: the traceparent of the submit's span, or without one
// the caller's header (jobTrace); so does a gang's every task and a
// triggered schedule's run. A job a schedule's tick fires has a trace only
// when the node records spans. A trace is data only: nothing here changes
// a decision.

// Span attribute keys.
const (
	attrJobID     = attribute.Key("workron.job.id")
	attrJobIDs    = attribute.Key("workron.job.ids")
	attrJobCount  = attribute.Key("workron.job.count")
	attrQueue     = attribute.Key("workron.job.queue")
	attrType      = attribute.Key("workron.job.type")
	attrAttempt   = attribute.Key("workron.job.attempt")
	attrStatus    = attribute.Key("workron.job.status")
	attrWorker    = attribute.Key("workron.worker.id")
	attrRequestID = attribute.Key("workron.request_id")
	attrSchedule  = attribute.Key("workron.schedule.name")
	attrTick      = attribute.Key("workron.schedule.tick")
	attrFired     = attribute.Key("workron.schedule.fired")
)

// tracerName names the node's tracer (the instrumentation scope).
const tracerName = "github.com/workron/workron/api"

// withTrace starts a server span per request, a child of the request's
// traceparent header, named by the route the mux picks; without a Tracer
// it returns next.
func (s *Server) withTrace(next http.Handler) http.Handler {
	if s.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Method
		attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)}
		if _, pattern := s.mux.Handler(r); pattern != "" && pattern != "/" {
			name = pattern
			_, route, _ := strings.Cut(pattern, " ")
			attrs = append(attrs, attribute.String("http.route", route))
		}
		ctx := traceparent.FromHeader(r.Context(), r.Header)
		ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status),
			attrRequestID.String(w.Header().Get(headerRequestID)))
		if sw.status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// traceRoute adds to the request's span what its path names: the job of
// /jobs/{id}/... and the queue of /queues/{name}/....
func (s *Server) traceRoute(mux http.Handler) http.Handler {
	if s.tracer == nil {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r) // sets r.Pattern and the path values
		span := trace.SpanFromContext(r.Context())
		_, route, _ := strings.Cut(r.Pattern, " ")
		switch {
		case strings.HasPrefix(route, "/jobs/{id}"):
			span.SetAttributes(attrJobID.String(r.PathValue("id")))
		case strings.HasPrefix(route, "/queues/{name}"):
			span.SetAttributes(attrQueue.String(r.PathValue("name")))
		}
	})
}

// traceparentKey is the traceparent header's key in an http.Header.
var traceparentKey = http.CanonicalHeaderKey(traceparent.Header)

// jobTrace is the traceparent a job submitted by r stores (a job, every
// task of a gang, a triggered schedule's run): its request's span (the
// node's, or the caller's header when the node records none);
// "" when there is none, or while a member of the cluster runs a protocol
// before traces (the job is then stored without one, rather than the
// submit refused). A member whose protocol is not known yet makes it wait
// (raftnode.Node.AwaitProtocol), rather than drop the trace.
func (s *Server) jobTrace(r *http.Request) string {
	ctx := r.Context()
	spanned := trace.SpanContextFromContext(ctx).IsValid()
	if _, ok := r.Header[traceparentKey]; !spanned && !ok {
		return "" // no span, no header: nothing to parse, no protocol to wait for
	}
	if s.node.AwaitProtocol(ctx) < fsm.ProtocolTrace {
		return ""
	}
	if !spanned {
		ctx = traceparent.FromHeader(ctx, r.Header)
	}
	return traceparent.Of(ctx)
}

// traceJobs sets the request span's job attributes: the job's id, queue
// and type, or for several jobs their count and ids.
func traceJobs(ctx context.Context, jobs ...*store.Job) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || len(jobs) == 0 {
		return
	}
	if len(jobs) == 1 {
		span.SetAttributes(jobAttrs(jobs[0])...)
		return
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	span.SetAttributes(attrJobCount.Int(len(jobs)), attrJobIDs.StringSlice(ids))
}

func jobAttrs(j *store.Job) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attrJobID.String(j.ID), attrQueue.String(j.Queue)}
	if j.Type != "" {
		attrs = append(attrs, attrType.String(j.Type))
	}
	return attrs
}

// traceClaimed records, in each claimed job's trace, a "claim" span from
// when the attempt could start to its claim, linked to the claim request.
func (s *Server) traceClaimed(ctx context.Context, jobs []*store.Job) {
	if s.tracer == nil {
		return
	}
	traceJobs(ctx, jobs...)
	link := trace.LinkFromContext(ctx)
	for _, j := range jobs {
		if j.TraceParent == "" {
			continue
		}
		from := time.Unix(0, min(j.RunAt, j.StartedAt))
		_, span := s.tracer.Start(traceparent.Context(ctx, j.TraceParent), "claim",
			trace.WithTimestamp(from), trace.WithLinks(link), trace.WithAttributes(attemptAttrs(j)...))
		span.End(trace.WithTimestamp(time.Unix(0, j.StartedAt)))
	}
}

func attemptAttrs(j *store.Job) []attribute.KeyValue {
	return append(jobAttrs(j), attrAttempt.Int(j.Attempts), attrWorker.String(j.WorkerID))
}

// traceEnded records, in the job's trace, a "report" span for an attempt
// its worker ended (the child of the run span the report names), or a
// "lease expired" span for one the reaper ended.
func (s *Server) traceEnded(ctx context.Context, j *store.Job, expired bool) {
	if s.tracer == nil {
		return
	}
	traceJobs(ctx, j)
	if j.TraceParent == "" {
		return
	}
	name, parent := "report", reportTrace(ctx, j.ID)
	if expired {
		name = "lease expired"
	}
	pctx := ctx // a report whose request came in the job's trace
	switch {
	case parent != "":
		pctx = traceparent.Context(ctx, parent)
	case !sameTrace(ctx, j.TraceParent):
		pctx = traceparent.Context(ctx, j.TraceParent)
	}
	attrs := append(attemptAttrs(j), attrStatus.String(string(j.Status)))
	_, span := s.tracer.Start(pctx, name,
		trace.WithLinks(trace.LinkFromContext(ctx)), trace.WithAttributes(attrs...))
	if j.Status == store.StatusFailed || j.Status == store.StatusPending {
		span.SetStatus(codes.Error, j.LastError)
	}
	span.End()
}

// sameTrace reports whether ctx's span belongs to the trace tp names.
func sameTrace(ctx context.Context, tp string) bool {
	sc := trace.SpanContextFromContext(traceparent.Context(context.Background(), tp))
	return sc.IsValid() && sc.TraceID() == trace.SpanContextFromContext(ctx).TraceID()
}

// reportTraces maps a job id to the traceparent its report named.
type reportTraces map[string]string

type reportTracesKey struct{}

// withReportTraces returns ctx with the run spans reps name, for
// traceEnded; ctx itself when none does or nothing is traced.
func (s *Server) withReportTraces(ctx context.Context, reps []wire.BatchReport) context.Context {
	if s.tracer == nil {
		return ctx
	}
	var m reportTraces
	for _, rep := range reps {
		if tp, ok := traceparent.Parse(rep.TraceParent); ok {
			if m == nil {
				m = make(reportTraces)
			}
			m[rep.JobID] = tp
		}
	}
	if m == nil {
		return ctx
	}
	return context.WithValue(ctx, reportTracesKey{}, m)
}

func reportTrace(ctx context.Context, jobID string) string {
	m, _ := ctx.Value(reportTracesKey{}).(reportTraces)
	return m[jobID]
}

// TraceFire starts the "schedule.fire" span of a tick of sc that the
// leader's scheduler fires, the root of a trace of its own, and sets
// f.TraceParent to it, so that the job the fire makes stores it and its
// attempts' spans join it; what it returns ends the span with the fire's
// outcome (the job, or none when the schedule skipped the tick). Without a
// Tracer it records nothing and sets no trace; while a member of the
// cluster runs a protocol before traces it sets none either (the fire
// goes as before, see jobTrace).
func (s *Server) TraceFire(ctx context.Context, sc *store.Schedule, f *fsm.Fire) func(fsm.Result, error) {
	if s.tracer == nil {
		return func(fsm.Result, error) {}
	}
	queue := fsm.DefaultQueue
	if nj, err := fsm.ScheduleJob(sc); err == nil && nj.Queue != "" {
		queue = nj.Queue
	}
	ctx, span := s.tracer.Start(ctx, "schedule.fire", trace.WithNewRoot(), trace.WithAttributes(
		attrSchedule.String(sc.Name), attrTick.String(time.Unix(0, f.Tick).UTC().Format(time.RFC3339Nano)),
		attrJobID.String(f.JobID), attrQueue.String(queue)))
	if s.node.AwaitProtocol(ctx) >= fsm.ProtocolTrace {
		f.TraceParent = traceparent.Of(ctx)
	}
	return func(res fsm.Result, err error) {
		defer span.End()
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			return
		}
		span.SetAttributes(attrFired.Bool(len(res.Jobs) == 1))
		if len(res.Jobs) == 1 {
			span.SetAttributes(append(jobAttrs(res.Jobs[0]), attrStatus.String(string(res.Jobs[0].Status)))...)
		}
		if res.Schedule != nil && res.Schedule.LastError != "" && len(res.Jobs) == 0 {
			span.SetStatus(codes.Error, res.Schedule.LastError)
		}
	}
}
