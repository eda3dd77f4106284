// Package telemetry owns the OpenTelemetry tracer provider of one Workron
// process (a node or a worker): spans exported over OTLP/HTTP when an
// endpoint is configured, and a no-op provider when none is, which starts
// no goroutine and records nothing. It also reads and writes the W3C
// traceparent that carries a job's trace between nodes, workers and jobs.
// It never sets OpenTelemetry's globals, and a trace never changes what the
// scheduler decides: the trace context is data only.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures a Provider.
type Config struct {
	// Endpoint is the base URL of an OTLP/HTTP collector, e.g.
	// "http://127.0.0.1:4318"; spans go to its /v1/traces (the meaning of
	// OTEL_EXPORTER_OTLP_ENDPOINT, which it overrides). Empty: the standard
	// variables decide (see Enabled).
	Endpoint string
	// ServiceName is the service.name of the spans unless OTEL_SERVICE_NAME
	// or OTEL_RESOURCE_ATTRIBUTES names one. Defaults to "workron".
	ServiceName string
	// InstanceID, when set, is the service.instance.id of the spans (a
	// node's or a worker's id).
	InstanceID string
	// Exporter, when set, receives every span as it ends, synchronously,
	// instead of an OTLP exporter (tests pass the SDK's in-memory exporter).
	Exporter sdktrace.SpanExporter
	// Getenv reads the environment. Defaults to os.Getenv.
	Getenv func(string) string
}

// Provider is a tracer provider and what ends it.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider // nil when no-op
}

// Enabled reports whether cfg exports spans: an Exporter or Endpoint is
// set, or OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none
// turns it off.
func (c *Config) Enabled() bool {
	getenv := c.getenv()
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return c.Exporter != nil || c.Endpoint != "" ||
		getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Validate checks Endpoint: an http or https URL with a host.
func (c *Config) Validate() error {
	if c.Endpoint == "" {
		return nil
	}
	_, err := endpointURL(c.Endpoint)
	return err
}

func (c *Config) getenv() func(string) string {
	if c.Getenv != nil {
		return c.Getenv
	}
	return os.Getenv
}

// endpointURL is the URL spans are sent to for base: its path with
// /v1/traces appended.
func endpointURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("telemetry: the OTLP endpoint must be an http:// or https:// URL with a host, like http://127.0.0.1:4318, got %q", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}

// New builds the provider cfg asks for: without an exporter (Enabled
// false) a no-op provider, which costs nothing; else an SDK provider that
// batches spans to the OTLP exporter (or hands them to Config.Exporter at
// once), sampled as OTEL_TRACES_SAMPLER says (by default: every trace
// whose caller sampled it or that starts here). Creating the exporter does
// not connect: a collector that is down costs dropped spans, never a
// failed start.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	name := cfg.ServiceName
	if name == "" {
		name = "workron"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.InstanceID))
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults above.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.Exporter != nil {
		opts = append(opts, sdktrace.WithSyncer(cfg.Exporter))
	} else {
		var eopts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			u, err := endpointURL(cfg.Endpoint)
			if err != nil {
				return nil, err
			}
			eopts = append(eopts, otlptracehttp.WithEndpointURL(u))
		}
		exp, err := otlptracehttp.New(ctx, eopts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	sdk := sdktrace.NewTracerProvider(opts...)
	return &Provider{TracerProvider: sdk, sdk: sdk}, nil
}

// Recording reports whether the provider exports spans (false: no-op).
func (p *Provider) Recording() bool { return p != nil && p.sdk != nil }

// Shutdown sends the spans still buffered and stops the exporter, within
// ctx. A no-op provider has nothing to do. Safe to call twice.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Recording() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flush spans: %w", err)
	}
	return nil
}

// ShutdownTimeout is how long a process's Shutdown waits for its last
// spans to reach the collector.
const ShutdownTimeout = 5 * time.Second
