package traceparent_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/internal/traceparent"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceparent(t *testing.T) {
	t.Run("ParseKeepsValidOnesAndRefusesTheRest", func(t *testing.T) {
		if got, ok := traceparent.Parse(tp); !ok || got != tp {
			t.Errorf("Parse(%q) = %q, %v", tp, got, ok)
		}
		for _, bad := range []string{"", "garbage", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
			"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
			if got, ok := traceparent.Parse(bad); ok || got != "" {
				t.Errorf("Parse(%q) = %q, %v; want it refused", bad, got, ok)
			}
		}
	})
	t.Run("TraceIDIsTheSecondField", func(t *testing.T) {
		if got := traceparent.TraceID(tp); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("TraceID(%q) = %q", tp, got)
		}
		if got := traceparent.TraceID("garbage"); got != "" {
			t.Errorf("TraceID of garbage = %q, want empty", got)
		}
	})
	t.Run("HeadersCarryIt", func(t *testing.T) {
		in := http.Header{"Traceparent": {tp}}
		ctx := traceparent.FromHeader(context.Background(), in)
		if traceparent.Of(ctx) != tp || !trace.SpanContextFromContext(ctx).IsRemote() {
			t.Fatalf("FromHeader read %q", traceparent.Of(ctx))
		}
		out := http.Header{"Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}, "Tracestate": {"a=b"}}
		traceparent.Inject(ctx, out)
		if out.Get("traceparent") != tp || out.Get("tracestate") != "" {
			t.Errorf("Inject left %v", out)
		}
		traceparent.Inject(context.Background(), out)
		if len(out) != 0 {
			t.Errorf("Inject of no trace left %v", out)
		}
	})
}
