// Package traceparent reads and writes the W3C Trace Context (the
// traceparent and tracestate headers, and the TRACEPARENT variable of a
// job's process) that carries a job's trace between
// clients, nodes, workers and jobs. It depends on OpenTelemetry's API
// only, never its SDK, so the worker package can use it; it records no
// span.
package traceparent

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names, and the environment variable a job's process gets.
const (
	Header      = "traceparent"
	StateHeader = "tracestate"
	Env         = "TRACEPARENT"
)

var w3c propagation.TraceContext

// FromHeader returns ctx with the remote span context of h's traceparent
// (and tracestate) as its parent; ctx unchanged when h has none or an
// invalid one.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject sets h's traceparent (and tracestate) to the span context of ctx,
// and removes any it had when ctx has none.
func Inject(ctx context.Context, h http.Header) {
	h.Del(Header)
	h.Del(StateHeader)
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// Context returns ctx with the remote span context tp names as its parent:
// ctx unchanged when tp is empty or not a valid traceparent.
func Context(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{Header: tp})
}

// Of is the traceparent of the span context in ctx, "" when it has none.
// It is written in the one form W3C's version 00 gives it, whatever form
// it was read in.
func Of(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	m := propagation.MapCarrier{}
	w3c.Inject(ctx, m)
	return m[Header]
}

// Parse returns tp in its canonical form, and whether it is a valid
// traceparent.
func Parse(tp string) (string, bool) {
	out := Of(Context(context.Background(), tp))
	return out, out != ""
}

// TraceID is the trace id of traceparent tp (32 hex digits), what a tracing
// backend finds the trace by; "" when tp is not a valid traceparent.
func TraceID(tp string) string {
	sc := trace.SpanContextFromContext(Context(context.Background(), tp))
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
