package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// Limits of the node under attack, small so the test is quick.
const (
	hostileBodyLimit   = 64 << 10
	hostileHeaderLimit = 8 << 10
	hostileHeaderWait  = time.Second
)

// zeros is an endless body that counts what it hands out: a 100 MB upload
// without 100 MB in memory.
type zeros struct {
	left int64
	n    *atomic.Int64
}

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.left)
	for i := range p[:k] {
		p[i] = ' ' // JSON whitespace: only the size is wrong
	}
	z.left -= k
	z.n.Add(k)
	return int(k), nil
}

// TestHostileRequests sends one node, with small limits, requests meant to
// break it. Each gets a bounded, clear 4xx (a JSON error from the API, or
// net/http's own answer for a request too broken to route) or a closed
// connection, in bounded time; afterwards the node is healthy and its log
// grew only by the one request that was valid.
func TestHostileRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	srv, _ := inProcessNode(t, "--id", "h1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "h1"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms",
		"--max-body-bytes", fmt.Sprint(hostileBodyLimit), "--max-header-bytes", fmt.Sprint(hostileHeaderLimit),
		"--read-header-timeout", hostileHeaderWait.String(), "--read-timeout", "5s", "--max-long-polls", "1", "--max-wait", "30s")
	base := srv.advertise
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	pollUntil(t, 15*time.Second, func() error { return healthOK(hc, base) })
	pollUntil(t, 5*time.Second, func() error { // the node's own address is recorded
		if cl := clusterOf(t, hc, base); len(cl.Nodes) != 1 || cl.Nodes[0].HTTP == "" {
			return fmt.Errorf("cluster %+v", cl)
		}
		return nil
	})
	before := clusterOf(t, hc, base).AppliedIndex

	type reply struct {
		status int
		code   string // the JSON error's code; "" if the body is not one
		header http.Header
	}
	send := func(t *testing.T, method, path, contentType string, body io.Reader, header http.Header) (reply, error) {
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			return reply{}, err
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := hc.Do(req)
		if err != nil {
			return reply{}, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return reply{}, err
		}
		var e wire.Error
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return reply{resp.StatusCode, e.Code, resp.Header}, nil
		}
		return reply{resp.StatusCode, "", resp.Header}, nil
	}

	var sent atomic.Int64
	cases := []struct {
		name         string
		method, path string
		contentType  string
		body         func() io.Reader
		header       http.Header
		status       int
		code         string // "" for net/http's plain-text answers
	}{
		{"MalformedJSON", "POST", "/jobs", "application/json", text(`{"command": "x",`), nil, 400, "invalid"},
		{"DeeplyNestedJSON", "POST", "/jobs", "application/json", text(strings.Repeat("[", 60000)), nil, 400, "invalid"},
		{"DeeplyNestedObjects", "POST", "/jobs/batch", "application/json", text(strings.Repeat(`{"jobs":`, 7000)), nil, 400, "invalid"},
		{"NullBytes", "POST", "/jobs", "application/json", text("\x00\x00{}"), nil, 400, "invalid"},
		{"InvalidUTF8", "POST", "/jobs", "application/json", text("{\"command\":\"\xff\xfe\",\"queue\":\"\xc0\"}"), nil, 400, "invalid"},
		{"HundredMegabyteBody", "POST", "/jobs", "application/json", func() io.Reader { return &zeros{left: 100 << 20, n: &sent} }, nil, 413, "too_large"},
		{"HundredMegabyteClaim", "POST", "/jobs/claim", "application/json", func() io.Reader { return &zeros{left: 100 << 20, n: &sent} }, nil, 413, "too_large"},
		{"HugeHeader", "GET", "/jobs", "", nil, http.Header{"X-Junk": {strings.Repeat("j", 4*hostileHeaderLimit)}}, 431, ""},
		{"ManyHeaders", "GET", "/jobs", "", nil, manyHeaders(2000), 431, ""},
		{"UnknownContentTypeWithJunk", "POST", "/jobs", "multipart/form-data; boundary=x", text("--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n\x00\xff\r\n--x--"), nil, 415, "unsupported_media_type"},
		{"XMLBody", "POST", "/jobs", "application/xml", text(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>`), nil, 415, "unsupported_media_type"},
		{"XMLBodyWithoutContentType", "POST", "/jobs", "", text(`<?xml version="1.0"?><x/>`), nil, 400, "invalid"},
		{"PathTraversalEscaped", "GET", "/jobs/..%2F..%2Fetc%2Fpasswd", "", nil, nil, 404, "not_found"},
		{"PathTraversalInAnAction", "POST", "/jobs/..%2F..%2Fetc%2Fpasswd/cancel", "", nil, nil, 404, "not_found"},
		{"PathTraversalIntoTheDashboard", "GET", "/ui/..%2F..%2F..%2Fetc%2Fpasswd", "", nil, nil, 404, "not_found"},
		{"DotDotSegments", "GET", "/ui/../../etc/passwd", "", nil, nil, 404, "not_found"}, // cleaned and redirected to /etc/passwd
		{"ControlCharactersInAnID", "GET", "/jobs/%00%0A%1B%5B31m", "", nil, nil, 404, "not_found"},
		{"ControlCharactersInAQueue", "POST", "/queues/%0Aevil/pause", "", nil, nil, 400, "invalid"},
		{"VeryLongID", "GET", "/jobs/" + strings.Repeat("x", 4000), "", nil, nil, 404, "not_found"},
		{"UnknownMethod", "PATCH", "/jobs", "", nil, nil, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			start := time.Now()
			sent.Store(0)
			r, err := send(t, tc.method, tc.path, tc.contentType, body, tc.header)
			took := time.Since(start)
			if err != nil {
				// The node may close the connection on an oversized body
				// before the client has read its answer.
				if tc.status != http.StatusRequestEntityTooLarge || !connectionCut(err) {
					t.Fatalf("no answer: %v", err)
				}
			} else if r.status != tc.status || r.code != tc.code {
				t.Fatalf("want %d %q, got %d %q", tc.status, tc.code, r.status, r.code)
			}
			if took > 5*time.Second {
				t.Errorf("the answer took %s", took)
			}
			if n := sent.Load(); n > 16<<20 {
				t.Errorf("the node read %d MiB of a body limited to %d KiB", n>>20, hostileBodyLimit>>10)
			}
			if err := healthOK(hc, base); err != nil {
				t.Fatalf("after the request: %v", err)
			}
		})
	}

	t.Run("TextPlainWithValidJSONIsRefusedAndJSONAccepted", func(t *testing.T) {
		// text/plain is what a web page can post here without asking.
		r, err := send(t, "POST", "/jobs", "text/plain", strings.NewReader(`{"command":"true"}`), nil)
		if err != nil || r.status != http.StatusUnsupportedMediaType || r.code != "unsupported_media_type" {
			t.Fatalf("text/plain: got %+v %v", r, err)
		}
		r, err = send(t, "POST", "/jobs", "application/json", strings.NewReader(`{"command":"true"}`), nil)
		if err != nil || r.status != http.StatusCreated {
			t.Fatalf("application/json: got %+v %v", r, err)
		}
	})

	t.Run("SlowLorisIsCutOff", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		closed := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, conn) // returns when the node closes
			closed <- err
		}()
		start := time.Now()
		req := "GET /jobs HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 1000)
		for i := 0; i < len(req); i++ {
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				break // cut off
			}
			select {
			case <-closed:
				if took := time.Since(start); took > hostileHeaderWait+2*time.Second {
					t.Fatalf("cut off after %s, past --read-header-timeout %s", took, hostileHeaderWait)
				}
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		select {
		case <-closed:
		case <-time.After(hostileHeaderWait + 3*time.Second):
			t.Fatalf("the connection is still open after %s", time.Since(start))
		}
	})

	t.Run("ManySlowLorisConnectionsDoNotStarveOthers", func(t *testing.T) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range 200 {
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte("GET /jobs HTTP/1.1\r\nHost: x\r\n"))
			conns = append(conns, c)
		}
		if err := healthOK(hc, base); err != nil {
			t.Fatalf("with 200 idle half-requests open: %v", err)
		}
	})

	t.Run("LongPollsBeyondTheCapGet429", func(t *testing.T) {
		// --max-long-polls is 1: of two claims that both want to wait,
		// one waits its 2s out and the other is shed at once.
		type result struct {
			r    reply
			took time.Duration
			err  error
		}
		results := make(chan result, 2)
		for _, w := range []string{"p1", "p2"} {
			go func() {
				start := time.Now()
				r, err := send(t, "POST", "/jobs/claim", "application/json",
					strings.NewReader(`{"worker_id":"`+w+`","queues":["empty"],"wait":"2s"}`), nil)
				results <- result{r, time.Since(start), err}
			}()
		}
		got := map[int]result{}
		for range 2 {
			res := <-results
			if res.err != nil {
				t.Fatal(res.err)
			}
			got[res.r.status] = res
		}
		shed, waited := got[http.StatusTooManyRequests], got[http.StatusOK]
		if shed.r.code != "overloaded" || shed.r.header.Get("Retry-After") == "" || waited.r.status != http.StatusOK {
			t.Fatalf("want one 200 and one 429 overloaded with Retry-After, got %+v", got)
		}
		if shed.took > time.Second {
			t.Errorf("the shed claim took %s", shed.took)
		}
	})

	t.Run("TheNodeIsHealthyAndItsLogGrewByTheValidRequestOnly", func(t *testing.T) {
		if err := healthOK(hc, base); err != nil {
			t.Fatal(err)
		}
		after := clusterOf(t, hc, base).AppliedIndex
		if after != before+1 {
			t.Fatalf("applied index went from %d to %d; want one entry (the application/json submit)", before, after)
		}
	})
}

func text(s string) func() io.Reader { return func() io.Reader { return strings.NewReader(s) } }

func manyHeaders(n int) http.Header {
	h := make(http.Header, n)
	for i := range n {
		h.Set(fmt.Sprintf("X-H%d", i), "v")
	}
	return h
}

// connectionCut reports a transport error from the node hanging up.
func connectionCut(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe")
}

func healthOK(hc *http.Client, base string) error {
	resp, err := hc.Get(base + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: HTTP %d", resp.StatusCode)
	}
	return nil
}

func clusterOf(t *testing.T, hc *http.Client, base string) wire.Cluster {
	t.Helper()
	resp, err := hc.Get(base + "/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cl wire.Cluster
	if err := json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&cl); err != nil {
		t.Fatal(err)
	}
	return cl
}
