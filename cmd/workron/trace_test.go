package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestOTLPEndpointFlag: --otlp-endpoint reaches the node's config, and a
// worker given one that is not a URL refuses to start.
func TestOTLPEndpointFlag(t *testing.T) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f serverFlags
	f.register(fs)
	if err := fs.Parse([]string{"--id", "n1", "--otlp-endpoint", "http://127.0.0.1:4318"}); err != nil {
		t.Fatal(err)
	}
	nc, err := f.nodeConfig(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if nc.Tracing.Endpoint != "http://127.0.0.1:4318" || nc.Tracing.ServiceName != "workron" {
		t.Errorf("node Tracing = %+v", nc.Tracing)
	}
	err = runWorker(context.Background(), []string{"--server", "http://127.0.0.1:1", "--otlp-endpoint", "localhost:4318"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "OTLP endpoint") {
		t.Errorf("worker with --otlp-endpoint localhost:4318: %v, want an error naming the OTLP endpoint", err)
	}
}
