//go:build unix

package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/workron/workron/api/wire"
)

// otlpCollector is an OTLP/HTTP trace receiver on 127.0.0.1: it decodes
// each export and keeps its spans.
type otlpCollector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []collectedSpan
}

// collectedSpan is what the test reads of one exported span.
type collectedSpan struct {
	service, name, traceID, spanID, parentID string
	attrs                                    map[string]string
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	t.Helper()
	c := &otlpCollector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("collector: %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, rs := range req.GetResourceSpans() {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					cs := collectedSpan{service: service, name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId()),
						spanID: hex.EncodeToString(s.GetSpanId()), parentID: hex.EncodeToString(s.GetParentSpanId()),
						attrs: map[string]string{}}
					for _, kv := range s.GetAttributes() {
						cs.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
					}
					c.spans = append(c.spans, cs)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// trace returns the spans received so far of trace id.
func (c *otlpCollector) trace(id string) []collectedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []collectedSpan
	for _, s := range c.spans {
		if s.traceID == id {
			out = append(out, s)
		}
	}
	return out
}

// TestEndToEndTraceReachesAnOTLPCollector runs a node started from the
// server's flags with --otlp-endpoint, and the real `workron worker` binary
// with --otlp-endpoint too, against an OTLP/HTTP collector on 127.0.0.1. A
// job submitted with a traceparent header is followed in the caller's
// trace: the node's span of the submit (with the job's id and queue), the
// attempt's claim and report, and the worker's run span, whose context
// the job's process gets as TRACEPARENT.
func TestEndToEndTraceReachesAnOTLPCollector(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts a node and a worker process")
	}
	bin := workronBinary(t)
	col := newOTLPCollector(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50 ms, not the default 5 s
	t.Setenv("OTEL_SERVICE_NAME", "")
	srv, _ := inProcessNode(t, "--id", "tr1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "tr1"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms",
		"--otlp-endpoint", col.srv.URL)
	startWorkerProc(t, bin, srv.advertise, "trace-worker", []string{"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=trace-worker"}, "--poll-wait", "1s", "--otlp-endpoint", col.srv.URL)

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body, _ := json.Marshal(wire.SubmitRequest{Command: `echo "TRACEPARENT=$TRACEPARENT"`, Queue: "default"})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.advertise+"/jobs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var job wire.Job
	err = json.NewDecoder(resp.Body).Decode(&job)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: HTTP %d, %v", resp.StatusCode, err)
	}
	if !strings.Contains(job.TraceParent, traceID) {
		t.Fatalf("the job's traceparent %q is not in the caller's trace %s", job.TraceParent, traceID)
	}

	cs := clientSecurity{}
	cl, err := cs.newClient([]string{srv.advertise}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var done *wire.Job
	pollUntil(t, 30*time.Second, func() error {
		if done, err = cl.Get(t.Context(), job.ID); err != nil {
			return err
		}
		if done.Status != wire.StatusDone {
			return fmt.Errorf("job %s is %s", job.ID, done.Status)
		}
		return nil
	})

	byName := map[string]collectedSpan{}
	pollUntil(t, 30*time.Second, func() error {
		clear(byName)
		for _, s := range col.trace(traceID) {
			byName[s.name] = s
		}
		for _, want := range []string{"POST /jobs", "claim", "run", "report"} {
			if _, ok := byName[want]; !ok {
				return fmt.Errorf("no %q span of trace %s yet (have %v)", want, traceID, byName)
			}
		}
		return nil
	})
	submit, run := byName["POST /jobs"], byName["run"]
	if submit.parentID != callerSpan || submit.attrs["workron.job.id"] != job.ID || submit.attrs["workron.job.queue"] != "default" {
		t.Errorf("submit span: parent %s (want the caller's %s), attributes %v", submit.parentID, callerSpan, submit.attrs)
	}
	if run.service != "trace-worker" || submit.service == "trace-worker" {
		t.Errorf("run span from service %q, submit span from %q: want the worker's and the node's", run.service, submit.service)
	}
	if report := byName["report"]; report.parentID != run.spanID {
		t.Errorf("report span's parent %s, want the run span %s", report.parentID, run.spanID)
	}
	if want := "TRACEPARENT=00-" + traceID + "-" + run.spanID + "-01"; !strings.Contains(done.Output, want) {
		t.Errorf("the job's output %q lacks %q: its process did not get the run span's context", done.Output, want)
	}
}
