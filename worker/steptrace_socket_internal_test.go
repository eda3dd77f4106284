//go:build unix

package worker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// A shell job's steps through its step socket are spans "step NAME" of
// the job's run span too: a step recorded before is replayed at its
// lookup; a step looked up is one span to its record, or to its release
// (an error: nothing recorded), or to the socket's close.
func TestStepSocketSpans(t *testing.T) {
	mux := http.NewServeMux()
	step := func(w http.ResponseWriter, code int, st wire.Step) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(st)
	}
	mux.HandleFunc("GET /jobs/j1/steps/fetch", func(w http.ResponseWriter, r *http.Request) {
		step(w, http.StatusOK, wire.Step{Key: "fetch", Status: wire.StepOK, Attempts: 1, Result: json.RawMessage(`"x"`)})
	})
	mux.HandleFunc("PUT /jobs/j1/steps/{key}", func(w http.ResponseWriter, r *http.Request) {
		step(w, http.StatusCreated, wire.Step{Key: r.PathValue("key"), Status: wire.StepOK, Attempts: 1})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ccfg := client.DefaultConfig()
	ccfg.Servers = []string{srv.URL}
	cl, err := client.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, run := tp.Tracer("test").Start(t.Context(), "run")
	defer run.End()
	j := &journal{client: cl, jobID: "j1", lease: 7, seen: map[string]int{}, recorded: map[string]string{"fetch": wire.StepOK}, complete: true}
	s, err := openStepSocket(ctx, j, jobPeers(-1, -1, nil))
	if err != nil {
		t.Fatal(err)
	}
	sc := NewStepSocketClient(s.path)
	defer sc.Close()
	for _, name := range []string{"fetch", "charge", "flaky", "killed"} {
		if _, err := sc.Next(t.Context(), name); err != nil {
			t.Fatalf("look up %s: %v", name, err)
		}
	}
	if _, err := sc.Record(t.Context(), "charge", wire.StepRequest{Result: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := sc.Release(t.Context(), "flaky"); err != nil {
		t.Fatal(err)
	}
	s.close()

	var got []string
	for _, sp := range rec.Ended() {
		attrs := map[string]string{}
		for _, a := range sp.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		if sp.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("span %s is not a child of the run span", sp.Name())
		}
		got = append(got, fmt.Sprintf("%s key=%s status=%s replayed=%s code=%s %s", sp.Name(), attrs["workron.step.key"],
			attrs["workron.step.status"], attrs["workron.step.replayed"], sp.Status().Code, sp.Status().Description))
	}
	want := []string{
		"step fetch key=fetch status=ok replayed=true code=Unset ",
		"step charge key=charge status=ok replayed=false code=Unset ",
		"step flaky key=flaky status= replayed=false code=Error " + errStepReleased.Error(),
		"step killed key=killed status= replayed=false code=Error " + errStepUnrecorded.Error(),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
