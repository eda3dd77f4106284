package worker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/traceparent"
)

// tracerName names the worker's tracer (the instrumentation scope).
const tracerName = "github.com/workron/workron/worker"

// traceRun starts the attempt's "run" span, a child of the job's trace
// (wire.Job.TraceParent, from the claim), with Config.Tracer. It returns
// the context the job runs in (the span in it, for a handler's own spans),
// the job with TraceParent set to the run span (what the job's process
// gets as TRACEPARENT and the report names), and what ends the span with
// the run's error. Without a Tracer the span records nothing and
// TraceParent stays the job's: the trace is still handed on.
func (w *Worker) traceRun(ctx context.Context, job wire.Job) (context.Context, wire.Job, func(error)) {
	var opts []trace.SpanStartOption
	if w.cfg.Tracer != nil { // the no-op tracer reads none: spare each job them
		opts = []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attribute.String("workron.job.id", job.ID),
				attribute.String("workron.job.queue", job.Queue),
				attribute.String("workron.job.type", job.Type),
				attribute.Int("workron.job.attempt", job.Attempts),
				attribute.String("workron.worker.id", w.cfg.ID),
			),
		}
	}
	ctx, span := w.tracer.Start(traceparent.Context(ctx, job.TraceParent), "run", opts...)
	if tp := traceparent.Of(ctx); tp != "" {
		job.TraceParent = tp
	}
	return ctx, job, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
