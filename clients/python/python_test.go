//go:build unix

// Package python_test runs the Python client's tests (clients/python/tests)
// against the real binary: one node built from ./cmd/workron, serving HTTPS
// with a test CA and requiring tokens, so `go test ./...` covers the Python
// package too. Without python3 the test skips, unless CI=true.
package python_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/ports"
	"github.com/workron/workron/internal/testkit/testcert"
)

// Tokens of the test node's token file, one per role.
const (
	adminToken  = "python-test-admin-token-0001"
	clientToken = "python-test-client-token-0001"
	workerToken = "python-test-worker-token-0001"
	// durableToken holds client and worker: a durable job's invoke
	// submits its child, which needs the client role too.
	durableToken = "python-test-durable-token-001"
)

// leaseTTL is short so a killed worker's job runs elsewhere soon.
const leaseTTL = "2s"

// longLeaseTTL is the lease of the second node, whose workers heartbeat
// every 30s: what reaches them sooner did not come with a heartbeat
// (tests/test_push.py).
const longLeaseTTL = "90s"

func TestPythonClient(t *testing.T) {
	python := needPython(t)
	if out, err := exec.Command(python, "-c", "import sys; assert sys.version_info >= (3, 9), sys.version").CombinedOutput(); err != nil {
		t.Fatalf("python3 must be 3.9 or newer: %v\n%s", err, out)
	}
	dir := t.TempDir()
	bin := buildWorkron(t, dir)
	ca := testcert.NewCA(t, "python-test")
	url, caFile := startNode(t, bin, ca, filepath.Join(dir, "py1"), leaseTTL)
	longURL, _ := startNode(t, bin, ca, filepath.Join(dir, "py2"), longLeaseTTL)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // a bound, not a speed check: about 2 min on a quiet machine
	defer cancel()
	args := []string{"-m", "unittest", "discover", "-v", "-s", "tests", "-t", "."}
	if k := os.Getenv("WORKRON_PYTHON_TESTS"); k != "" { // a pattern, as for unittest -k
		args = append(args, "-k", k)
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = append(os.Environ(),
		"WORKRON_TEST_URL="+url,
		"WORKRON_TEST_CA="+caFile,
		"WORKRON_TEST_ADMIN_TOKEN="+adminToken,
		"WORKRON_TEST_CLIENT_TOKEN="+clientToken,
		"WORKRON_TEST_WORKER_TOKEN="+workerToken,
		"WORKRON_TEST_DURABLE_TOKEN="+durableToken,
		"WORKRON_TEST_LEASE_TTL="+leaseTTL,
		"WORKRON_TEST_LONG_LEASE_URL="+longURL,
		"WORKRON_TEST_BIN="+bin, // `workron step` in shell jobs (tests/test_stepsocket.py)
		"PYTHONDONTWRITEBYTECODE=1",
		"WORKRON_TOKEN=", "WORKRON_TLS_CA=", // not the caller's: the tests pass their own
	)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("python tests failed: %v", err)
	}
}

// startNode starts one bootstrapping node of bin on free ports, with TLS
// (a certificate of ca), a token file and leases of ttl, in dir; it
// returns the node's URL and CA file.
func startNode(t *testing.T, bin string, ca *testcert.CA, dir, ttl string) (url, caFile string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile := ca.Files(t, dir, ca.Issue(t, "node"), "node")
	tokens := filepath.Join(dir, "tokens")
	body := fmt.Sprintf("admin %s admin\nclient %s python-client\nworker %s python-worker\nclient,worker %s python-durable\n", adminToken, clientToken, workerToken, durableToken)
	if err := os.WriteFile(tokens, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		p, err := ports.Free(2)
		if err != nil {
			t.Fatal(err)
		}
		url = "https://127.0.0.1:" + strconv.Itoa(p[0])
		cmd := exec.Command(bin, "server", "--id", "py1", "--bootstrap",
			"--http", "127.0.0.1:"+strconv.Itoa(p[0]), "--raft", "127.0.0.1:"+strconv.Itoa(p[1]),
			"--advertise-http", url, "--data", filepath.Join(dir, "data", strconv.Itoa(try)),
			"--tls-cert", certFile, "--tls-key", keyFile, "--auth-token-file", tokens,
			"--lease-ttl", ttl, "--reap-interval", "100ms", "--max-wait", "5s",
			"--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms")
		logs, err := os.Create(filepath.Join(dir, "node.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); logs.Close(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		if waitHealthy(t, url, ca.Pool(), exited) {
			return url, caFile
		}
		select {
		case <-exited:
			if try < 3 { // a port was taken meanwhile
				continue
			}
		default:
		}
		data, _ := os.ReadFile(filepath.Join(dir, "node.log"))
		t.Fatalf("node at %s never became healthy:\n%s", url, data)
	}
}

// waitHealthy polls GET /health until the node leads, it exits, or 30s pass.
func waitHealthy(t *testing.T, url string, pool *x509.CertPool, exited <-chan struct{}) bool {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		resp, err := c.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
