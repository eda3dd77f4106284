//go:build unix

package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// stepSocketPut sends body to PUT /steps/{key} of the socket at path.
func stepSocketPut(t *testing.T, path, key string, body []byte) int {
	t.Helper()
	c := NewStepSocketClient(path)
	defer c.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://step/steps/"+key, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// A step socket refuses a body larger than a step's result may be (413),
// and the record of a key no lookup handed out (409), before asking the
// cluster anything (the journal's client has no server); its directory is
// private, and gone once it is closed.
func TestStepSocketBounds(t *testing.T) {
	j := &journal{jobID: "j1", lease: 7, seen: map[string]int{}, recorded: map[string]string{}, complete: true}
	s, err := openStepSocket(t.Context(), j, jobPeers(-1, -1, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if fi, err := os.Stat(s.dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory %v (%v), want mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(s.path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v (%v), want mode 0600", fi.Mode(), err)
	}
	big := append(append([]byte(`{"result":"`), bytes.Repeat([]byte("x"), MaxStepResultBytes+8<<10)...), `"}`...)
	if code := stepSocketPut(t, s.path, "count", big); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized record: %d, want 413", code)
	}
	if code := stepSocketPut(t, s.path, "count", []byte(`{"result":"1"}`)); code != http.StatusConflict {
		t.Fatalf("record of a key not looked up: %d, want 409", code)
	}
	s.close()
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket directory after close: %v, want gone", err)
	}
}

// A shell job's process gets WORKRON_STEP_SOCKET, a socket it can reach
// while it runs; once the process ended, the socket is gone.
func TestShellJobStepSocketEndsWithTheProcess(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Servers = []string{"http://127.0.0.1:1"}
	cfg.Shell = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.client.Close()
	seen := filepath.Join(t.TempDir(), "seen")
	out := w.runShell(t.Context(), wire.Job{ID: "j1", Lease: 3, Attempts: 1,
		Command: `test -S "$WORKRON_STEP_SOCKET" && printf %s "$WORKRON_STEP_SOCKET" > "` + seen + `"`})
	if out.err != nil {
		t.Fatalf("job: %v (%s)", out.err, out.output)
	}
	b, err := os.ReadFile(seen)
	if err != nil || !strings.HasSuffix(string(b), "/s") {
		t.Fatalf("the job saw step socket %q (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Dir(string(b))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("step socket's directory after the job: %v, want gone", err)
	}
}

// A step socket's parking calls go to the cluster under the attempt's
// lease: a parked answer says Parked and ends the attempt (the journal's
// onPark, which stops the job's process in a worker); a complete wait
// gives its step with the payload.
func TestStepSocketParks(t *testing.T) {
	var gotLease atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs/j1/steps/{key}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Lease uint64 `json:"lease"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		gotLease.Store(body.Lease)
		rep := wire.ParkReply{Parked: true, Step: wire.Step{Key: r.PathValue("key"), Status: wire.StepWaiting}}
		if r.PathValue("verb") == wire.StepWait {
			rep = wire.ParkReply{Step: wire.Step{Key: r.PathValue("key"), Status: wire.StepOK, Result: json.RawMessage(`{"paid":1}`)}}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(rep)
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
	var parks atomic.Int32
	j := &journal{client: cl, jobID: "j1", lease: 7, seen: map[string]int{}, recorded: map[string]string{}, complete: true,
		onPark: func() { parks.Add(1) }}
	s, err := openStepSocket(t.Context(), j, jobPeers(-1, -1, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	sc := NewStepSocketClient(s.path)
	defer sc.Close()

	second := int64(1000)
	got, err := sc.Wait(t.Context(), "settled", wire.WaitRequest{Lease: 999, Event: "paid", Key: "o1"})
	if err != nil || got.Parked || got.Step == nil || string(got.Step.Result) != `{"paid":1}` || gotLease.Load() != 7 {
		t.Fatalf("Wait = %+v, %v (lease sent %d, want 7)", got, err, gotLease.Load())
	}
	got, err = sc.Sleep(t.Context(), "nap", wire.SleepRequest{DurationMillis: &second})
	if err != nil || !got.Parked || got.Key != "nap" || parks.Load() != 1 {
		t.Fatalf("Sleep = %+v, %v (parks %d)", got, err, parks.Load())
	}
	got, err = sc.Sleep(t.Context(), "nap", wire.SleepRequest{DurationMillis: &second})
	if err != nil || got.Key != "nap#2" || parks.Load() != 1 {
		t.Fatalf("a second Sleep = %+v, %v; onPark ran %d times, want once", got, err, parks.Load())
	}
}

// A step socket answers a new step name past MaxStepNames with 429, for a
// lookup and a parking call alike, before asking the cluster anything.
func TestStepSocketStepNamesBound(t *testing.T) {
	j := &journal{jobID: "j1", lease: 7, seen: map[string]int{}, recorded: map[string]string{}, complete: true}
	for i := range MaxStepNames {
		j.seen[strconv.Itoa(i)] = 1
	}
	s, err := openStepSocket(t.Context(), j, jobPeers(-1, -1, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	sc := NewStepSocketClient(s.path)
	defer sc.Close()
	if _, err := sc.Next(t.Context(), "one-more"); err == nil || !strings.Contains(err.Error(), "429") {
		t.Fatalf("lookup past the bound: %v, want 429", err)
	}
	if _, err := sc.Wait(t.Context(), "one-more", wire.WaitRequest{Event: "e", Key: "k"}); err == nil || !strings.Contains(err.Error(), "429") {
		t.Fatalf("wait past the bound: %v, want 429", err)
	}
}

// A step socket answers a peer whose uid is not one it allows with 403
// naming the uid, before the journal sees the request, and says so in the
// worker's log; a peer it allows is served.
func TestStepSocketRefusesOtherUsers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are read on Linux only")
	}
	open := func(t *testing.T, allowed int, log *slog.Logger) *StepSocketClient {
		j := &journal{jobID: "j1", lease: 7, seen: map[string]int{}, recorded: map[string]string{"fetch": wire.StepOK}, complete: true}
		s, err := openStepSocket(t.Context(), j, stepPeers{uid: -1, gid: -1, allowed: []int{allowed}, log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.close)
		sc := NewStepSocketClient(s.path)
		t.Cleanup(sc.Close)
		return sc
	}
	t.Run("AnotherUIDIsRefusedAndLogged", func(t *testing.T) {
		var logged bytes.Buffer
		sc := open(t, os.Geteuid()+1, slog.New(slog.NewTextHandler(&logged, nil)))
		_, err := sc.Next(t.Context(), "charge")
		want := fmt.Sprintf("peer uid %d", os.Geteuid())
		if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), want) {
			t.Fatalf("lookup from uid %d: %v, want 403 naming it", os.Geteuid(), err)
		}
		if !strings.Contains(logged.String(), "refused a connection") || !strings.Contains(logged.String(), fmt.Sprintf("peer_uid=%d", os.Geteuid())) {
			t.Fatalf("worker log %q, want the refusal with the peer's uid", logged.String())
		}
	})
	t.Run("TheJobsUIDIsServed", func(t *testing.T) {
		sc := open(t, os.Geteuid(), nil)
		if got, err := sc.Next(t.Context(), "charge"); err != nil || got.Key != "charge" {
			t.Fatalf("lookup from the allowed uid: %+v, %v", got, err)
		}
	})
}

// TestShellJobFindsTheStepCLI: with Config.StepCLI (set by `workron
// worker` to itself), a shell job finds that binary as `workron` first on
// its PATH, whatever the PATH it was given, so `workron step` works after
// the quick start's build into bin/ and speaks this worker's protocol.
func TestShellJobFindsTheStepCLI(t *testing.T) {
	bin := t.TempDir()
	cli := filepath.Join(bin, "workron")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\necho step-cli\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Servers = []string{"http://127.0.0.1:1"}
	cfg.Shell = true
	cfg.StepCLI = cli
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.client.Close()
	seen := filepath.Join(t.TempDir(), "seen")
	out := w.runShell(t.Context(), wire.Job{ID: "j1", Lease: 3, Attempts: 1, Env: map[string]string{"PATH": "/usr/bin:/bin"},
		Command: `{ workron; printf '%s\n' "$PATH"; } > "` + seen + `"`})
	if out.err != nil {
		t.Fatalf("job: %v (%s)", out.err, out.output)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if want := "step-cli\n" + bin + ":/usr/bin:/bin\n"; string(b) != want {
		t.Errorf("the job printed %q, want %q (the step CLI's directory first, then the job's PATH)", b, want)
	}
}
