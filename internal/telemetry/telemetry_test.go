package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workron/workron/internal/telemetry"
)

// env is an environment of the given NAME=VALUE pairs only.
func env(pairs ...string) func(string) string {
	m := make(map[string]string)
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// collector is a fake OTLP/HTTP collector: it records the paths and
// content types of the requests it gets.
type collector struct {
	mu   sync.Mutex
	got  []string
	srv  *httptest.Server
	body int
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		c.body += len(b)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) requests() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...), c.body
}

func TestProvider(t *testing.T) {
	ctx := context.Background()
	t.Run("NothingConfiguredRecordsNothing", func(t *testing.T) {
		p, err := telemetry.New(ctx, telemetry.Config{Getenv: env()})
		if err != nil {
			t.Fatal(err)
		}
		if p.Recording() {
			t.Fatal("a provider without an endpoint records")
		}
		sctx, span := p.Tracer("t").Start(ctx, "x")
		span.End()
		if span.IsRecording() || trace.SpanContextFromContext(sctx).IsValid() {
			t.Error("the no-op provider made a real span")
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		// goleak (TestMain): it started no goroutine.
	})

	t.Run("TheStandardVariablesDecide", func(t *testing.T) {
		for _, c := range []struct {
			endpoint string
			env      []string
			want     bool
		}{
			{"", nil, false},
			{"", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}, true},
			{"", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces"}, true},
			{"http://127.0.0.1:4318", nil, true},
			{"http://127.0.0.1:4318", []string{"OTEL_SDK_DISABLED=true"}, false},
			{"", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://x:4318", "OTEL_TRACES_EXPORTER=none"}, false},
		} {
			cfg := telemetry.Config{Endpoint: c.endpoint, Getenv: env(c.env...)}
			if got := cfg.Enabled(); got != c.want {
				t.Errorf("Enabled with endpoint %q and env %q = %v, want %v", c.endpoint, c.env, got, c.want)
			}
		}
	})

	t.Run("AnEndpointMustBeAURL", func(t *testing.T) {
		for _, bad := range []string{"127.0.0.1:4318", "grpc://host:4317", "http://", "://x"} {
			cfg := telemetry.Config{Endpoint: bad, Getenv: env()}
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "OTLP endpoint") {
				t.Errorf("Validate(%q) = %v, want an error naming the OTLP endpoint", bad, err)
			}
		}
	})

	t.Run("ExportsOverOTLPHTTPAndFlushesOnShutdown", func(t *testing.T) {
		col := newCollector(t)
		p, err := telemetry.New(ctx, telemetry.Config{Endpoint: col.srv.URL + "/base/", Getenv: env()})
		if err != nil {
			t.Fatal(err)
		}
		_, span := p.Tracer("t").Start(ctx, "x")
		span.End()
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		got, n := col.requests()
		if len(got) != 1 || got[0] != "POST /base/v1/traces application/x-protobuf" || n == 0 {
			t.Errorf("the collector got %q (%d bytes), want one POST /base/v1/traces of protobuf", got, n)
		}
	})

	t.Run("SpansNameTheServiceUnlessOTELServiceNameDoes", func(t *testing.T) {
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
		for _, c := range []struct{ env, want string }{{"", "workron"}, {"billing", "billing"}} {
			t.Setenv("OTEL_SERVICE_NAME", c.env)
			attrs := resourceOf(t, telemetry.Config{InstanceID: "n1", Getenv: env()})
			if attrs["service.name"] != c.want || attrs["service.instance.id"] != "n1" {
				t.Errorf("with OTEL_SERVICE_NAME=%q: resource %v, want service.name %s and instance n1", c.env, attrs, c.want)
			}
		}
	})
}

// resourceOf records one span through cfg (with an in-memory exporter)
// and returns the attributes of its resource.
func resourceOf(t *testing.T, cfg telemetry.Config) map[string]string {
	t.Helper()
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	cfg.Exporter = exp
	p, err := telemetry.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("t").Start(ctx, "x")
	span.End()
	spans := exp.GetSpans()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	return attrs
}
