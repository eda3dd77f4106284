package node_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/workron/workron/node"
)

func TestNodeTraces(t *testing.T) {
	t.Run("NoExporterNoTracer", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
		n, err := node.Start(testConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		defer n.Shutdown()
		if tp := n.Tracer(); tp != nil {
			t.Fatalf("a node without an OTLP endpoint has tracer provider %T", tp)
		}
	})

	t.Run("ShutdownSendsTheLastSpans", func(t *testing.T) {
		var (
			mu  sync.Mutex
			got []string
		)
		col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			got = append(got, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}))
		defer col.Close()
		cfg := testConfig(t)
		cfg.Tracing.Endpoint = col.URL
		n, err := node.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n.Tracer() == nil {
			t.Fatal("a node with an OTLP endpoint has no tracer provider")
		}
		resp, err := http.Get(n.URL() + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
		// The batch waits 5s before it exports; only Shutdown sent it by now.
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 || !strings.HasSuffix(got[0], " /v1/traces") {
			t.Errorf("the collector got %q, want the node's spans at /v1/traces", got)
		}
	})

	t.Run("ABadEndpointIsRefused", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Tracing.Endpoint = "localhost:4318"
		if _, err := node.Start(cfg); err == nil || !strings.Contains(err.Error(), "Tracing") {
			t.Fatalf("Start with endpoint %q: %v, want an error naming Tracing", cfg.Tracing.Endpoint, err)
		}
	})
}
