package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/internal/testkit/syncbuf"
)

// httpReply is one HTTP answer, read whole.
type httpReply struct {
	Status int
	Header http.Header
	Body   []byte
}

// httpClient returns a client whose idle connections close when the test
// ends, so goleak sees no stray readers. Every exchange it makes is checked
// against openapi.json (api.CheckContract).
func httpClient(t *testing.T) *http.Client {
	c := &http.Client{Transport: &contractTransport{t: t, base: &http.Transport{}}, Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// contractTransport checks each request and reply against openapi.json.
type contractTransport struct {
	t    *testing.T
	base *http.Transport
}

func (c *contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return resp, nil // the caller sees the body cut short
	}
	api.CheckContract(c.t, req, body, resp.StatusCode, resp.Header, data)
	return resp, nil
}

func (c *contractTransport) CloseIdleConnections() { c.base.CloseIdleConnections() }

// doHTTP sends a request (body JSON-encoded unless nil) with the headers,
// given as name-value pairs, and requires the status.
func doHTTP(t *testing.T, c *http.Client, want int, method, url string, body any, headers ...string) httpReply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read reply: %v", method, url, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: want HTTP %d, got %d %s", method, url, want, resp.StatusCode, bytes.TrimSpace(data))
	}
	return httpReply{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// decodeJSON parses a reply body into a T.
func decodeJSON[T any](t *testing.T, r httpReply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r.Body, err)
	}
	return v
}

// logBuffer collects JSON log lines from concurrent writers.
type logBuffer struct{ syncbuf.Buffer }

// lines parses every line written so far.
func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the lines whose fields include every given key=value pair
// (values compared as printed).
func (b *logBuffer) find(t *testing.T, kv ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range b.lines(t) {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if fmt.Sprint(m[kv[i]]) != kv[i+1] {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}
