package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
)

// Durable steps of a shell job (`workron step NAME -- CMD`, issue #31).
//
// A shell job has no lease and no token, so it cannot record a step
// itself. For each running shell job the worker serves a small HTTP API on
// a unix socket in a private directory, named by WORKRON_STEP_SOCKET in the
// job's environment, and answers it with the job's own attempt (its
// journal, the same one job.Step uses, occurrence counting included):
//
//	POST /steps/{name}  the next occurrence of name: its key, and the
//	                    recorded step (with its result) when there is one
//	PUT  /steps/{key}   record key, a key the POST gave as not recorded;
//	                    the body is a wire.StepRequest (its lease is the
//	                    attempt's, whatever the body says)
//	DELETE /steps/{key} give up key without recording it (the step
//	                    failed: a later attempt runs it again)
//
// The socket is removed when the job's process ends.

// StepSocketEnv is the variable that gives a shell job the path of its
// step socket.
const StepSocketEnv = "WORKRON_STEP_SOCKET"

// MaxStepResultBytes is the largest result of one step, in bytes: the
// cluster's bound (fsm.MaxStepResultBytes, which the worker does not
// import; a test in cmd/workron keeps the two equal).
const MaxStepResultBytes = 256 << 10

// Bounds of a step socket.
const (
	// maxStepSocketBody bounds a request body: a result and room for the
	// rest of a wire.StepRequest.
	maxStepSocketBody = MaxStepResultBytes + 4<<10
	// maxStepsPending is the most keys handed out as not recorded and not
	// yet recorded (steps running at once).
	maxStepsPending = 64
	// maxStepNames is the most distinct step names one attempt counts.
	maxStepNames = 10_000
	// maxSocketDirBytes is the longest temporary directory a socket is
	// made in; past it, /tmp.
	maxSocketDirBytes = 64
	// stepSocketShutdown bounds how long close waits for requests to end.
	stepSocketShutdown = 2 * time.Second
)

// StepLookup is the reply of POST /steps/{name} on a step socket: the key
// of name's next occurrence and, when it is recorded, the step with its
// result (Step nil: run it, then record it under Key).
type StepLookup struct {
	Key  string     `json:"key"`
	Step *wire.Step `json:"step,omitempty"`
}

// stepSocket serves one running shell job's steps.
type stepSocket struct {
	dir    string
	path   string
	ln     net.Listener
	srv    *http.Server
	j      *journal
	done   chan struct{}
	cancel context.CancelFunc // ends the requests' context

	mu      sync.Mutex
	pending map[string]bool
	names   map[string]bool
}

// openStepSocket listens on a new unix socket in a directory of its own
// (mode 0700, given to uid/gid when they are not -1) and serves the steps
// of journal j until close. ctx bounds the requests to the cluster.
func openStepSocket(ctx context.Context, j *journal, uid, gid int) (*stepSocket, error) {
	base := os.TempDir()
	if len(base) > maxSocketDirBytes {
		base = "/tmp" // a unix socket's path is short (108 bytes on Linux)
	}
	dir, err := os.MkdirTemp(base, "workron-step-")
	if err != nil {
		return nil, fmt.Errorf("step socket: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stepSocket{dir: dir, path: filepath.Join(dir, "s"), j: j, done: make(chan struct{}), cancel: cancel,
		pending: map[string]bool{}, names: map[string]bool{}}
	if s.ln, err = net.Listen("unix", s.path); err != nil {
		cancel()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("step socket: %w", err)
	}
	if uid >= 0 {
		for _, p := range []string{dir, s.path} {
			if err := os.Chown(p, uid, gid); err != nil {
				s.close()
				return nil, fmt.Errorf("step socket: %w", err)
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /steps/{name}", s.handleLookup)
	mux.HandleFunc("PUT /steps/{key}", s.handleRecord)
	mux.HandleFunc("DELETE /steps/{key}", s.handleRelease)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln)
	}()
	return s, nil
}

// close stops serving (requests still running end: their context is
// cancelled) and removes the socket and its directory.
func (s *stepSocket) close() {
	s.cancel()
	if s.srv != nil {
		ctx, stop := context.WithTimeout(context.Background(), stepSocketShutdown)
		defer stop()
		if s.srv.Shutdown(ctx) != nil {
			_ = s.srv.Close()
		}
		<-s.done
	} else {
		_ = s.ln.Close()
	}
	_ = os.RemoveAll(s.dir)
}

func (s *stepSocket) handleLookup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.Lock()
	full := !s.names[name] && len(s.names) >= maxStepNames
	busy := len(s.pending) >= maxStepsPending
	if !full && !busy {
		s.names[name] = true
	}
	s.mu.Unlock()
	switch {
	case full:
		stepSocketError(w, http.StatusTooManyRequests, fmt.Sprintf("more than %d step names in one attempt", maxStepNames))
		return
	case busy:
		stepSocketError(w, http.StatusTooManyRequests, fmt.Sprintf("more than %d steps running at once", maxStepsPending))
		return
	}
	key, rec, err := s.j.lookup(r.Context(), name)
	if err != nil {
		stepSocketError(w, http.StatusBadGateway, err.Error())
		return
	}
	if rec == nil {
		s.mu.Lock()
		s.pending[key] = true
		s.mu.Unlock()
	}
	writeStepJSON(w, http.StatusOK, StepLookup{Key: key, Step: rec})
}

func (s *stepSocket) handleRecord(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	var req wire.StepRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxStepSocketBody))
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			stepSocketError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body: more than %d bytes (a step's result is at most %d)", mbe.Limit, MaxStepResultBytes))
			return
		}
		stepSocketError(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	s.mu.Lock()
	ok := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if !ok {
		stepSocketError(w, http.StatusConflict, fmt.Sprintf("step %s: not looked up as unrecorded in this attempt (POST /steps/{name} first)", key))
		return
	}
	st, err := s.j.record(r.Context(), key, req)
	if err != nil {
		stepSocketError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeStepJSON(w, http.StatusOK, st)
}

func (s *stepSocket) handleRelease(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	delete(s.pending, r.PathValue("key"))
	s.mu.Unlock()
	writeStepJSON(w, http.StatusOK, struct{}{})
}

func writeStepJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func stepSocketError(w http.ResponseWriter, status int, msg string) {
	writeStepJSON(w, status, map[string]string{"error": msg})
}

// StepSocketClient speaks to a shell job's step socket (StepSocketEnv);
// `workron step` uses it.
type StepSocketClient struct {
	hc *http.Client
}

// NewStepSocketClient is a client of the step socket at path.
func NewStepSocketClient(path string) *StepSocketClient {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &StepSocketClient{hc: &http.Client{Transport: tr}}
}

// Close releases the client's connections.
func (c *StepSocketClient) Close() { c.hc.CloseIdleConnections() }

// Next looks up name's next occurrence in the job's attempt: its key, and
// the recorded step when there is one.
func (c *StepSocketClient) Next(ctx context.Context, name string) (*StepLookup, error) {
	var out StepLookup
	if err := c.do(ctx, http.MethodPost, name, nil, &out); err != nil {
		return nil, fmt.Errorf("look up step %s: %w", name, err)
	}
	return &out, nil
}

// Record records step key (a key Next gave as not recorded) and returns
// the step as the journal keeps it (another attempt's, if it recorded the
// step first).
func (c *StepSocketClient) Record(ctx context.Context, key string, req wire.StepRequest) (*wire.Step, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("record step %s: %w", key, err)
	}
	var out wire.Step
	if err := c.do(ctx, http.MethodPut, key, body, &out); err != nil {
		return nil, fmt.Errorf("record step %s: %w", key, err)
	}
	return &out, nil
}

// Release gives up key (a key Next gave as not recorded) without
// recording it: the step failed, and a later attempt runs it again.
func (c *StepSocketClient) Release(ctx context.Context, key string) error {
	var out struct{}
	if err := c.do(ctx, http.MethodDelete, key, nil, &out); err != nil {
		return fmt.Errorf("release step %s: %w", key, err)
	}
	return nil
}

func (c *StepSocketClient) do(ctx context.Context, method, name string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://step/steps/"+url.PathEscape(name), bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxStepSocketBody+1))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return fmt.Errorf("worker: %s: %s", resp.Status, e.Error)
	}
	return json.Unmarshal(data, out)
}
