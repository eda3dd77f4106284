package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
//	POST /steps/{name}/sleep, /wait, /invoke
//	                    park on name's next occurrence (the body is a
//	                    wire.SleepRequest, WaitRequest or InvokeRequest,
//	                    its lease the attempt's): the step when it is
//	                    complete, or parked true, and then the worker
//	                    ends the job's process and its attempt, with no
//	                    report (park.go)
//
// Only the job's processes may speak to it: the directory is 0700 and
// the socket 0600, both the job's user's, and on Linux the worker reads
// each connection's peer credentials (SO_PEERCRED) and answers a peer
// whose uid is neither the job's nor the worker's with 403 (logged once
// per connection).
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
	// maxSocketDirBytes is the longest temporary directory a socket is
	// made in; past it, /tmp.
	maxSocketDirBytes = 64
	// stepSocketShutdown bounds how long close waits for requests to end.
	stepSocketShutdown = 2 * time.Second
)

// StepLookup is the reply of POST /steps/{name} on a step socket: the key
// of name's next occurrence and, when it is recorded, the step with its
// result (Step nil: run it, then record it under Key). Of a parking call
// (POST /steps/{name}/sleep, wait or invoke): Parked true when the job
// parked (the worker is ending the process), else the complete Step.
type StepLookup struct {
	Key    string     `json:"key"`
	Step   *wire.Step `json:"step,omitempty"`
	Parked bool       `json:"parked,omitempty"`
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

	peers stepPeers

	mu      sync.Mutex
	pending map[string]*stepSpan // keys looked up as not recorded, each with its step's span
}

// stepPeers says who owns a step socket and who may speak to it.
type stepPeers struct {
	// uid and gid own the socket and its directory; -1 leaves them the
	// worker's.
	uid, gid int
	// allowed are the uids a peer may have (the worker's, and the job's
	// when it runs as another user); a peer with another uid gets 403.
	allowed []int
	log     *slog.Logger
}

// jobPeers are the peers of a job's step socket: owned by the job's user
// (runAs, or -1 for the worker's own), open to it and to the worker's uid.
func jobPeers(uid, gid int, log *slog.Logger) stepPeers {
	allowed := []int{os.Geteuid()}
	if uid >= 0 {
		allowed = append(allowed, uid)
	}
	return stepPeers{uid: uid, gid: gid, allowed: allowed, log: log}
}

// peer is the process at the other end of a step socket's connection;
// known false where the OS does not say (peercred_other.go).
type peer struct {
	uid, pid int
	known    bool
}

// peerRefusal is the context key of a connection's refusal (an error),
// set by admit.
type peerRefusal struct{}

// openStepSocket listens on a new unix socket (mode 0600) in a directory
// of its own (mode 0700), both given to p.uid/p.gid when they are not -1,
// and serves the steps of journal j to p's allowed peers until close. ctx
// bounds the requests to the cluster.
func openStepSocket(ctx context.Context, j *journal, p stepPeers) (*stepSocket, error) {
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
		peers: p, pending: map[string]*stepSpan{}}
	if s.ln, err = net.Listen("unix", s.path); err != nil {
		cancel()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("step socket: %w", err)
	}
	if err := os.Chmod(s.path, 0o600); err != nil {
		s.close()
		return nil, fmt.Errorf("step socket: %w", err)
	}
	if p.uid >= 0 {
		for _, f := range []string{dir, s.path} {
			if err := os.Chown(f, p.uid, p.gid); err != nil {
				s.close()
				return nil, fmt.Errorf("step socket: %w", err)
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /steps/{name}", s.handleLookup)
	mux.HandleFunc("PUT /steps/{key}", s.handleRecord)
	mux.HandleFunc("DELETE /steps/{key}", s.handleRelease)
	mux.HandleFunc("POST /steps/{name}/sleep", s.handlePark(wire.StepSleep))
	mux.HandleFunc("POST /steps/{name}/wait", s.handlePark(wire.StepWait))
	mux.HandleFunc("POST /steps/{name}/invoke", s.handlePark(wire.StepInvoke))
	s.srv = &http.Server{Handler: s.onlyPeers(mux), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }, ConnContext: s.admit}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln)
	}()
	return s, nil
}

// admit reads the peer of a new connection and, when it may not speak to
// the socket, logs it and keeps the refusal in the connection's context
// for onlyPeers.
func (s *stepSocket) admit(ctx context.Context, c net.Conn) context.Context {
	p, err := peerCred(c)
	switch {
	case err != nil:
		err = fmt.Errorf("step socket: %w", err)
	case p.known && !slices.Contains(s.peers.allowed, p.uid):
		err = fmt.Errorf("step socket: peer uid %d (pid %d) is not the job's or the worker's (uids %v)", p.uid, p.pid, s.peers.allowed)
	default:
		return ctx
	}
	if s.peers.log != nil {
		s.peers.log.Warn("step socket: refused a connection", "job_id", s.j.jobID, "peer_uid", p.uid, "peer_pid", p.pid, "err", err)
	}
	return context.WithValue(ctx, peerRefusal{}, err)
}

// onlyPeers answers 403 on a connection admit refused, else passes the
// request to next.
func (s *stepSocket) onlyPeers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err, refused := r.Context().Value(peerRefusal{}).(error); refused {
			stepSocketError(w, http.StatusForbidden, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
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
	s.mu.Lock()
	for _, span := range s.pending {
		span.endWith(errStepUnrecorded)
	}
	clear(s.pending)
	s.mu.Unlock()
}

func (s *stepSocket) handleLookup(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	busy := len(s.pending) >= maxStepsPending
	s.mu.Unlock()
	if busy {
		stepSocketError(w, http.StatusTooManyRequests, fmt.Sprintf("more than %d steps running at once", maxStepsPending))
		return
	}
	ctx, span := traceStep(r.Context(), r.PathValue("name"), stepKindRun, nil) // steptrace.go
	key, rec, err := s.j.lookup(ctx, r.PathValue("name"))
	span.lookedUp(key, rec)
	if err != nil {
		span.endWith(err)
		stepSocketJournalError(w, err)
		return
	}
	if rec != nil {
		span.end()
	} else {
		s.mu.Lock()
		s.pending[key] = span // ended by the record or the release
		s.mu.Unlock()
	}
	writeStepJSON(w, http.StatusOK, StepLookup{Key: key, Step: rec})
}

func (s *stepSocket) handleRecord(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	var req wire.StepRequest
	if !decodeStepBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	span, ok := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if !ok {
		stepSocketError(w, http.StatusConflict, fmt.Sprintf("step %s: not looked up as unrecorded in this attempt (POST /steps/{name} first)", key))
		return
	}
	st, err := s.j.record(r.Context(), key, req)
	span.recorded(st)
	span.endWith(err)
	if err != nil {
		stepSocketError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeStepJSON(w, http.StatusOK, st)
}

// handlePark serves a parking call of kind on name's next occurrence.
func (s *stepSocket) handlePark(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		var (
			st  *wire.Step
			err error
		)
		switch kind {
		case wire.StepSleep:
			var req wire.SleepRequest
			if !decodeStepBody(w, r, &req) {
				return
			}
			st, err = s.j.sleep(r.Context(), name, req)
		case wire.StepWait:
			var req wire.WaitRequest
			if !decodeStepBody(w, r, &req) {
				return
			}
			st, err = s.j.wait(r.Context(), name, req)
		default:
			var req wire.InvokeRequest
			if !decodeStepBody(w, r, &req) {
				return
			}
			st, err = s.j.invoke(r.Context(), name, req.Job)
		}
		var pe *ParkedError
		switch {
		case errors.As(err, &pe):
			writeStepJSON(w, http.StatusOK, StepLookup{Key: pe.Step, Parked: true})
		case err != nil:
			stepSocketJournalError(w, err)
		default:
			writeStepJSON(w, http.StatusOK, StepLookup{Key: st.Key, Step: st})
		}
	}
}

// decodeStepBody decodes r's body (at most maxStepSocketBody bytes) into
// v, or answers 413 or 400 and reports false.
func decodeStepBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxStepSocketBody))
	err := dec.Decode(v)
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &mbe):
		stepSocketError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body: more than %d bytes (a step's result is at most %d)", mbe.Limit, MaxStepResultBytes))
	default:
		stepSocketError(w, http.StatusBadRequest, "body: "+err.Error())
	}
	return false
}

// stepSocketJournalError answers a failed journal call: 429 past the
// bound of step names, else 502 (the cluster's answer, or none).
func stepSocketJournalError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrTooManyStepNames) {
		stepSocketError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	stepSocketError(w, http.StatusBadGateway, err.Error())
}

func (s *stepSocket) handleRelease(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	span := s.pending[r.PathValue("key")]
	delete(s.pending, r.PathValue("key"))
	s.mu.Unlock()
	if span != nil {
		span.endWith(errStepReleased)
	}
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
	if err := c.do(ctx, http.MethodPost, name, "", nil, &out); err != nil {
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
	if err := c.do(ctx, http.MethodPut, key, "", body, &out); err != nil {
		return nil, fmt.Errorf("record step %s: %w", key, err)
	}
	return &out, nil
}

// Sleep parks the job on name's next occurrence for req's time (its
// lease is the attempt's, whatever req says): the step when it is
// complete, or Parked true.
func (c *StepSocketClient) Sleep(ctx context.Context, name string, req wire.SleepRequest) (*StepLookup, error) {
	return c.park(ctx, name, wire.StepSleep, req)
}

// Wait parks the job on name's next occurrence until req's event or
// signal, or its timeout: the step when it is complete (status ok with
// the payload, or timeout), or Parked true.
func (c *StepSocketClient) Wait(ctx context.Context, name string, req wire.WaitRequest) (*StepLookup, error) {
	return c.park(ctx, name, wire.StepWait, req)
}

// Invoke submits job as the child of name's next occurrence and parks
// the job until it ends: the step when it is complete, or Parked true.
func (c *StepSocketClient) Invoke(ctx context.Context, name string, job wire.SubmitRequest) (*StepLookup, error) {
	return c.park(ctx, name, wire.StepInvoke, wire.InvokeRequest{Job: job})
}

func (c *StepSocketClient) park(ctx context.Context, name, kind string, req any) (*StepLookup, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%s step %s: %w", kind, name, err)
	}
	var out StepLookup
	if err := c.do(ctx, http.MethodPost, name, "/"+kind, body, &out); err != nil {
		return nil, fmt.Errorf("%s step %s: %w", kind, name, err)
	}
	return &out, nil
}

// Release gives up key (a key Next gave as not recorded) without
// recording it: the step failed, and a later attempt runs it again.
func (c *StepSocketClient) Release(ctx context.Context, key string) error {
	var out struct{}
	if err := c.do(ctx, http.MethodDelete, key, "", nil, &out); err != nil {
		return fmt.Errorf("release step %s: %w", key, err)
	}
	return nil
}

func (c *StepSocketClient) do(ctx context.Context, method, name, suffix string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://step/steps/"+url.PathEscape(name)+suffix, bytes.NewReader(body))
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
