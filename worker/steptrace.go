package worker

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/api/wire"
)

// Spans of durable steps (issue #31). Each Job.Step (and each Sleep,
// WaitForEvent, WaitForSignal and Invoke, and each step of a shell job
// through its step socket: from its lookup to its record or release) is
// a span "step NAME"
// in the job's trace, a child of the span in the handler's context (the
// attempt's run span, or one the handler made), from the journal's lookup
// to the step's record, the step's function running inside it (its
// context carries the span, so the function's own spans are its
// children). Its attributes say which step it was and how it went:
//
//	workron.step.key       the key (name, name#2, ...)
//	workron.step.kind      "run" for a step the handler runs; "sleep",
//	                       "wait", "invoke"
//	workron.step.status    the recorded status (ok, failed); absent when
//	                       the function failed and nothing was recorded
//	workron.step.attempts  the recorded step's attempts
//	workron.step.replayed  true when the result came from the journal,
//	                       recorded by an earlier attempt, and the
//	                       function did not run
//	workron.step.parked    true when the step (a sleep, wait or invoke)
//	                       parked the job: the attempt ends there
//
// A step recorded failed, or one whose function failed, ends with an
// error status. A worker without Config.Tracer records nothing: the span
// comes from the tracer provider of the run span, a no-op one.

// Step span attribute keys.
const (
	attrStepKey      = attribute.Key("workron.step.key")
	attrStepKind     = attribute.Key("workron.step.kind")
	attrStepStatus   = attribute.Key("workron.step.status")
	attrStepAttempts = attribute.Key("workron.step.attempts")
	attrStepReplayed = attribute.Key("workron.step.replayed")
	attrStepParked   = attribute.Key("workron.step.parked")
)

// stepKindRun is the kind of a step whose function the handler runs.
const stepKindRun = "run"

// stepSpan is one step's span while the step runs.
type stepSpan struct {
	span     trace.Span
	kind     string     // the step's kind, until the recorded step says
	rec      *wire.Step // the step as the journal keeps it; nil: not recorded
	replayed bool
	parked   bool  // the step parked the job
	err      error // what the step's function last returned, or the parking call
}

// traceStep starts the span of step name, of kind kind, as a child of
// the span in ctx, with that span's tracer provider (the worker's, through
// its run span), and returns the context the step runs in. It wraps *fn
// (fn nil: a step with no function) so that the span sees the function's
// error.
func traceStep(ctx context.Context, name, kind string, fn *StepFunc) (context.Context, *stepSpan) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName)
	ctx, span := tracer.Start(ctx, "step "+name)
	s := &stepSpan{span: span, kind: kind}
	if span.IsRecording() && fn != nil {
		f := *fn
		*fn = func(ctx context.Context) (any, error) {
			v, err := f(ctx)
			s.err = err
			return v, err
		}
	}
	return ctx, s
}

// lookedUp notes the step's key and, when the journal held it, the
// recorded step, whose result is replayed unless it still waits.
func (s *stepSpan) lookedUp(key string, rec *wire.Step) {
	if !s.span.IsRecording() {
		return
	}
	s.span.SetAttributes(attrStepKey.String(key))
	if rec != nil {
		s.rec, s.replayed = rec, rec.Status != wire.StepWaiting
	}
}

// recorded notes the step as the journal keeps it after the record.
func (s *stepSpan) recorded(st *wire.Step) {
	if st != nil {
		s.rec = st
	}
}

// parking notes what a parking call (sleep, wait, invoke) answered: the
// step, and whether the job parked on it; or the call's error.
func (s *stepSpan) parking(rep *wire.ParkReply, err error) {
	if err != nil {
		s.rec, s.err = nil, err
		return
	}
	s.rec, s.parked = &rep.Step, rep.Parked
}

// errStepReleased is the error of a shell job's step given up without a
// record (its command failed).
var errStepReleased = errors.New("the step failed: released without a record")

// errStepUnrecorded is the error of a shell job's step looked up and
// neither recorded nor released when its process ended.
var errStepUnrecorded = errors.New("the job's process ended before the step was recorded")

// endWith ends the span, with err (if not nil) as what went wrong.
func (s *stepSpan) endWith(err error) {
	if err != nil {
		s.err = err
	}
	s.end()
}

// end ends the span with the step's outcome: the recorded step's status
// (an error status if it failed), else the function's error.
func (s *stepSpan) end() {
	if !s.span.IsRecording() {
		s.span.End()
		return
	}
	attrs := []attribute.KeyValue{attrStepKind.String(s.kind), attrStepReplayed.Bool(s.replayed)}
	st := s.rec
	if st != nil {
		attrs = append(attrs, attrStepStatus.String(st.Status), attrStepAttempts.Int(st.Attempts))
	}
	if s.parked {
		attrs = append(attrs, attrStepParked.Bool(true))
	}
	s.span.SetAttributes(attrs...)
	switch {
	case st != nil && st.Status == wire.StepFailed:
		s.span.SetStatus(codes.Error, "step failed: "+string(st.Result))
	case st == nil && s.err != nil:
		s.span.SetStatus(codes.Error, s.err.Error())
	case st == nil:
		s.span.SetStatus(codes.Error, "step not recorded")
	}
	s.span.End()
}
