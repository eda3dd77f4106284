package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/testkit/syncbuf"
	"github.com/workron/workron/internal/testkit/testcert"
	wnode "github.com/workron/workron/node"
	"github.com/workron/workron/worker/client"
)

// inProcessNode starts `workron server ARGS...` in this process, logging
// at debug level into the returned buffer, and stops it at cleanup.
func inProcessNode(t *testing.T, args ...string) (*runningServer, *syncbuf.Buffer) {
	t.Helper()
	f := *parsedFlags(t, args)
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := startServer(f, logger)
	if err != nil {
		t.Fatalf("start %s: %v", f.id, err)
	}
	t.Cleanup(func() {
		if err := srv.shutdown(); err != nil {
			t.Errorf("shutdown %s: %v", f.id, err)
		}
	})
	return srv, logs
}

// pollUntil polls cond every 20ms until it returns nil or timeout passes.
func pollUntil(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	poll.Wait(t, timeout, 20*time.Millisecond, cond)
}

// Tokens of the secure cluster.
const (
	tokAdmin  = "admin-0123456789abcdef"
	tokClient = "client-0123456789abcdef"
	tokWorker = "worker-0123456789abcdef"
)

// secureCluster is three nodes with HTTPS, mutual TLS for Raft and tokens.
type secureCluster struct {
	dir    string
	ca     *testcert.CA
	caFile string
	tokens string // the token file
	urls   []string
	logs   []*syncbuf.Buffer
}

// nodeArgs are the flags of a secure node whose certificate comes from ca.
func (c *secureCluster) nodeArgs(t *testing.T, id string, ca *testcert.CA) []string {
	leaf := ca.Issue(t, id)
	cert, key, _ := ca.Files(t, c.dir, leaf, id)
	return []string{"--id", id, "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--data", filepath.Join(c.dir, id),
		"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms",
		"--tls-cert", cert, "--tls-key", key, "--tls-ca", c.caFile, "--auth-token-file", c.tokens}
}

func startSecureCluster(t *testing.T) *secureCluster {
	t.Helper()
	c := &secureCluster{dir: t.TempDir(), ca: testcert.NewCA(t, "workron test CA")}
	c.caFile = filepath.Join(c.dir, "ca.crt")
	c.tokens = filepath.Join(c.dir, "tokens")
	for path, data := range map[string]string{
		c.caFile: string(c.ca.PEM),
		c.tokens: "admin " + tokAdmin + " ops\nclient " + tokClient + "\nworker " + tokWorker + "\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		args := c.nodeArgs(t, fmt.Sprintf("n%d", i), c.ca)
		if i == 1 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", c.urls[0])
		}
		srv, logs := inProcessNode(t, args...)
		c.urls = append(c.urls, srv.advertise)
		c.logs = append(c.logs, logs)
		if i == 1 {
			pollUntil(t, 15*time.Second, func() error { return c.healthy(srv.advertise) })
		}
	}
	pollUntil(t, 20*time.Second, func() error { return c.members(3) })
	return c
}

// httpsClient trusts the cluster's CA; it presents no client certificate.
func (c *secureCluster) httpsClient(t *testing.T) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.ca.Pool()}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (c *secureCluster) get(hc *http.Client, url, token string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func (c *secureCluster) healthy(url string) error {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.ca.Pool()}}
	defer tr.CloseIdleConnections()
	code, body, err := c.get(&http.Client{Transport: tr, Timeout: 5 * time.Second}, url+"/health", "")
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("health of %s: %d %s %v", url, code, body, err)
	}
	return nil
}

// members waits for every node to show n voters with HTTP addresses.
func (c *secureCluster) members(n int) error {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.ca.Pool()}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for _, u := range c.urls {
		code, body, err := c.get(hc, u+"/cluster?stale=1", tokClient)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("cluster of %s: %d %s %v", u, code, body, err)
		}
		var cl wire.Cluster
		if err := json.Unmarshal(body, &cl); err != nil {
			return err
		}
		known := 0
		for _, nd := range cl.Nodes {
			if nd.HTTP != "" {
				known++
			}
			if nd.Role == "nonvoter" { // a joined node votes once it has caught up
				return fmt.Errorf("%s sees %s still a non-voter", u, nd.ID)
			}
		}
		if len(cl.Nodes) != n || known != n || cl.Leader == "" {
			return fmt.Errorf("%s sees %d members, %d with addresses, leader %q", u, len(cl.Nodes), known, cl.Leader)
		}
	}
	return nil
}

// goClient is a worker/client for the cluster with a token.
func (c *secureCluster) goClient(t *testing.T, token string, servers ...string) *client.Client {
	t.Helper()
	cs := clientSecurity{token: token, ca: c.caFile}
	cl, err := cs.newClient(servers, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSecureCluster runs a three-node cluster with HTTPS, mutual TLS
// between nodes and bearer tokens, formed through --bootstrap and --join
// (so joining is authenticated end to end), and checks who gets in.
func TestSecureCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := startSecureCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("JobsRunOverHTTPSThroughAFollower", func(t *testing.T) {
		submitter := c.goClient(t, tokClient, c.urls[1], c.urls[2])
		job, err := submitter.Submit(ctx, wire.SubmitRequest{Command: "true", Queue: "secure"})
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		w := c.goClient(t, tokWorker, c.urls[2])
		cr, err := w.Claim(ctx, wire.ClaimRequest{WorkerID: "w1", Queues: []string{"secure"}, Shell: true, Wait: "5s"})
		if err != nil || len(cr.Jobs) != 1 {
			t.Fatalf("claim: %+v %v", cr, err)
		}
		if _, err := w.Done(ctx, job.ID, wire.ReportRequest{Lease: cr.Jobs[0].Lease}); err != nil {
			t.Fatalf("done: %v", err)
		}
		got, err := submitter.Get(ctx, job.ID)
		if err != nil || got.Status != "done" {
			t.Fatalf("job: %+v %v", got, err)
		}
	})

	t.Run("TokensAndRolesAreChecked", func(t *testing.T) {
		hc := c.httpsClient(t)
		for _, tc := range []struct {
			name, path, token string
			want              int
		}{
			{"NoToken", "/jobs", "", http.StatusUnauthorized},
			{"UnknownToken", "/jobs", "not-a-token-of-this-cluster", http.StatusUnauthorized},
			{"WorkerReadingJobs", "/jobs", tokWorker, http.StatusForbidden},
			{"ClientTakingABackup", "/backup", tokClient, http.StatusForbidden},
			{"ClientReadingJobs", "/jobs", tokClient, http.StatusOK},
			{"HealthWithoutToken", "/health", "", http.StatusOK},
			{"MetricsWithoutToken", "/metrics", "", http.StatusUnauthorized},
		} {
			for i, u := range c.urls {
				code, body, err := c.get(hc, u+tc.path, tc.token)
				if err != nil || code != tc.want {
					t.Errorf("%s on n%d: want %d, got %d %s %v", tc.name, i+1, tc.want, code, body, err)
				}
			}
		}
	})

	t.Run("PlainHTTPIsRefused", func(t *testing.T) {
		plain := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
		defer plain.CloseIdleConnections()
		url := "http://" + strings.TrimPrefix(c.urls[0], "https://")
		code, body, err := c.get(plain, url+"/jobs", tokClient)
		if err == nil && code < 400 {
			t.Fatalf("plain HTTP got %d %s", code, body)
		}
	})

	t.Run("AServerWithAnUnknownCertificateIsNotTrusted", func(t *testing.T) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testcert.NewCA(t, "other").Pool()}}
		defer tr.CloseIdleConnections()
		if _, _, err := c.get(&http.Client{Transport: tr, Timeout: 5 * time.Second}, c.urls[0]+"/health", ""); err == nil {
			t.Fatal("a client trusting another CA reached the node")
		}
	})

	t.Run("ANodeWithAForeignCertificateCannotJoin", func(t *testing.T) {
		// It holds the admin token and trusts the cluster's CA: only its
		// certificate, from another CA, is wrong.
		other := testcert.NewCA(t, "another CA")
		args := c.nodeArgs(t, "n4", other)
		_, logs := inProcessNode(t, append(args, "--join", c.urls[0]+","+c.urls[1])...)
		time.Sleep(2 * time.Second) // four announce rounds; a negative needs time to show
		if err := c.members(3); err != nil {
			t.Fatalf("the cluster changed: %v\nn4's log:\n%s", err, logs)
		}
		if strings.Contains(logs.String(), "node joined") {
			t.Fatalf("n4 thinks it joined:\n%s", logs)
		}
	})

	t.Run("TheBinarysWorkerAndCLIUseTokensAndTheCA", func(t *testing.T) {
		tokFile := filepath.Join(c.dir, "worker.token")
		if err := os.WriteFile(tokFile, []byte(tokWorker+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(context.Background())
		workerDone := make(chan error, 1)
		go func() {
			workerDone <- run(wctx, []string{"worker", "--server", c.urls[1], "--token-file", tokFile, "--tls-ca", c.caFile,
				"--queues", "cli", "--id", "cli-worker", "--poll-wait", "1s", "--log-level", "error"}, io.Discard, io.Discard)
		}()
		defer func() {
			stop()
			if err := <-workerDone; err != nil {
				t.Errorf("worker: %v", err)
			}
		}()
		var out, errOut bytes.Buffer
		args := []string{"submit", "--server", c.urls[2], "--token", tokClient, "--tls-ca", c.caFile, "--queue", "cli", "--wait", "--", "true"}
		if err := run(ctx, args, &out, &errOut); err != nil {
			t.Fatalf("workron submit --wait: %v\n%s%s", err, &out, &errOut)
		}
		out.Reset()
		if err := run(ctx, []string{"cluster", "status", "--server", c.urls[0], "--tls-ca", c.caFile, "--token", tokClient}, &out, &errOut); err != nil {
			t.Fatalf("workron cluster status: %v\n%s", err, &errOut)
		}
		err := run(ctx, []string{"jobs", "ls", "--server", c.urls[0], "--tls-ca", c.caFile, "--token", tokWorker}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("jobs ls with a worker token: %v", err)
		}
		t.Setenv("WORKRON_TOKEN", tokClient)
		if err := run(ctx, []string{"jobs", "ls", "--server", c.urls[0], "--tls-ca", c.caFile}, io.Discard, io.Discard); err != nil {
			t.Fatalf("jobs ls with WORKRON_TOKEN: %v", err)
		}
	})

	t.Run("LogsHoldNoToken", func(t *testing.T) {
		for i, l := range c.logs {
			for _, tok := range []string{tokAdmin, tokClient, tokWorker} {
				if strings.Contains(l.String(), tok) {
					t.Errorf("n%d's log holds a token", i+1)
				}
			}
		}
	})
}

func TestExposureWarnings(t *testing.T) {
	tok := &security{}
	for _, tc := range []struct {
		name       string
		sec        *security
		http, raft string
		warns      []string
	}{
		{"LoopbackIsQuiet", tok, "127.0.0.1:7001", "127.0.0.1:8001", nil},
		{"LocalhostIsQuiet", tok, "localhost:7001", "[::1]:8001", nil},
		{"AllInterfacesWithoutAuth", tok, "[::]:7001", "127.0.0.1:8001", []string{"requires no token"}},
		{"PublicRaftWithoutMutualTLS", tok, "127.0.0.1:7001", "0.0.0.0:8001", []string{"Raft", "mutual TLS"}},
		{"EmptyHostMeansEveryInterface", tok, "127.0.0.1:7001", ":8001", []string{"Raft"}},
		{"LoadWarningsAreSaid", &security{warn: []string{"SECURITY: the token file"}}, "127.0.0.1:7001", "127.0.0.1:8001", []string{"token file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.sec.warnExposure(slog.New(slog.NewTextHandler(&buf, nil)), tc.http, tc.raft)
			if len(tc.warns) == 0 && buf.Len() > 0 {
				t.Fatalf("warned: %s", &buf)
			}
			for _, w := range tc.warns {
				if !strings.Contains(buf.String(), w) || !strings.Contains(buf.String(), "level=WARN") {
					t.Errorf("no warning with %q: %s", w, &buf)
				}
			}
		})
	}
}

func TestSecurityFlagsAreChecked(t *testing.T) {
	dir := t.TempDir()
	weak := filepath.Join(dir, "weak")
	if err := os.WriteFile(weak, []byte("admin s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"CAWithoutCertificate":   {"--tls-ca", filepath.Join(dir, "ca.crt")},
		"CertificateWithoutKey":  {"--tls-cert", filepath.Join(dir, "n.crt")},
		"MissingTokenFile":       {"--auth-token-file", filepath.Join(dir, "nope")},
		"WeakToken":              {"--auth-token-file", weak},
		"TinyBodyLimit":          {"--max-body-bytes", "10"},
		"NoLongPolls":            {"--max-long-polls", "0"},
		"NegativeMaxConnections": {"--max-connections", "-1"},
		"AllowedHostWithScheme":  {"--allowed-hosts", "localhost,http://jobs.example"},
	} {
		t.Run(name, func(t *testing.T) {
			f := parsedFlags(t, args)
			_, err := f.sec.load()
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error quotes the token: %v", err)
			}
		})
	}
}

// parsedFlags are the server's flags args give.
func parsedFlags(t *testing.T, args []string) *serverFlags {
	t.Helper()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	var f serverFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f
}

// configuredNode is the node configuration the server's security flags
// args make (parsed, loaded and configured as runServer does).
func configuredNode(t *testing.T, args []string) wnode.Config {
	t.Helper()
	f := parsedFlags(t, args)
	sec, err := f.sec.load()
	if err != nil {
		t.Fatal(err)
	}
	nc := wnode.DefaultConfig()
	sec.configure(&f.sec, &nc)
	return nc
}

// TestBrowserFlagsReachTheNode: --max-connections and --allowed-hosts fill
// the node's configuration; their defaults are the node's.
func TestBrowserFlagsReachTheNode(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		conns int
		hosts []string
	}{
		{nil, wnode.DefaultMaxConnections, nil},
		{[]string{"--max-connections", "0", "--allowed-hosts", " jobs.example, proxy.internal ,"}, 0, []string{"jobs.example", "proxy.internal"}},
	} {
		nc := configuredNode(t, tc.args)
		if nc.MaxConnections != tc.conns || !slices.Equal(nc.API.AllowedHosts, tc.hosts) {
			t.Errorf("%q: MaxConnections %d, AllowedHosts %q; want %d, %q", tc.args, nc.MaxConnections, nc.API.AllowedHosts, tc.conns, tc.hosts)
		}
	}
}

// TestRestoreFlagReachesTheNode: --max-restore-bytes fills the API's
// MaxRestoreBytes; its default is the API's.
func TestRestoreFlagReachesTheNode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, 16 << 30}, // api.DefaultConfig().MaxRestoreBytes
		{[]string{"--max-restore-bytes", "2097152"}, 2 << 20},
	} {
		nc := configuredNode(t, tc.args)
		if nc.API.MaxRestoreBytes != tc.want {
			t.Errorf("%q: MaxRestoreBytes %d, want %d", tc.args, nc.API.MaxRestoreBytes, tc.want)
		}
	}
}

// TestServerFlagsAreChecked: values a configuration would quietly take for
// its default (zero) or that mean nothing are refused, naming the flag.
func TestServerFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"--schedule-grace", "0"},
		{"--schedule-grace", "-1s"},
		{"--schedule-max-catchup", "0"},
		{"--reserve-timeout", "0"},
		{"--drain-timeout", "0"},
		{"--admission-interval", "-1s"},
		{"--worker-offline-after", "-1s"},
		{"--forget-workers-after", "-1s"},
		{"--snapshot-threshold", "0"},
		{"--raft-trailing-logs", "0"},
		{"--raft-snapshot-interval", "0"},
		{"--raft-snapshot-interval", "-1s"},
	} {
		t.Run(strings.Join(args, "="), func(t *testing.T) {
			fs := flag.NewFlagSet("server", flag.ContinueOnError)
			var f serverFlags
			f.register(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := f.check()
			if err == nil || !strings.Contains(err.Error(), args[0]) {
				t.Fatalf("err = %v, want one naming %s", err, args[0])
			}
		})
	}
	for _, args := range [][]string{{"--raft-trailing-logs", "-1"}, {"--snapshot-threshold", "-5"}} {
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f serverFlags
		f.register(fs)
		if err := fs.Parse(args); err == nil || !strings.Contains(err.Error(), strings.TrimLeft(args[0], "-")) {
			t.Errorf("%s: err = %v, want one naming the flag", strings.Join(args, "="), err)
		}
	}
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	var f serverFlags
	f.register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := f.check(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}

func TestReadableTokenFileIsWarnedAbout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("client "+tokClient+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := securityFlags{tokenFile: path, maxBodyBytes: 1 << 20, maxHeaderBytes: 1 << 16, maxLongPolls: 1, maxBodyInFlight: 256 << 20, maxRestoreBytes: 1 << 30}
	sec, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(sec.warn, "\n")
	if !strings.Contains(all, "readable by other users") || !strings.Contains(all, "no admin token") {
		t.Fatalf("warnings: %q", sec.warn)
	}
}

// TestSIGHUPReloadsTokensAndCertificate runs `workron server` as the
// binary does, rotates its token file and certificate on disk, and sends
// the process SIGHUP: new tokens and the new certificate are in use at
// once, the old token is refused, and a broken file changes nothing.
func TestSIGHUPReloadsTokensAndCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "reload CA")
	cert, key, caFile := ca.Files(t, dir, ca.Issue(t, "n1"), "n1")
	tokens := filepath.Join(dir, "tokens")
	const tokOld, tokNew = "client-old-0123456789", "client-new-0123456789"
	writeTokens := func(data string) {
		t.Helper()
		if err := os.WriteFile(tokens, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens("admin " + tokAdmin + "\nclient " + tokOld + "\n")

	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, []string{"--id", "n1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
			"--data", filepath.Join(dir, "n1"), "--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms",
			"--tls-cert", cert, "--tls-key", key, "--tls-ca", caFile, "--auth-token-file", tokens}, logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	var url string
	pollUntil(t, 15*time.Second, func() error {
		_, rest, ok := strings.Cut(logs.String(), "msg=serving")
		if !ok {
			return fmt.Errorf("not serving yet")
		}
		_, rest, _ = strings.Cut(rest, "http=")
		url, _, _ = strings.Cut(rest, " ")
		return nil
	})
	// status answers GET /jobs with token on a fresh connection, and the
	// serial number of the certificate the server showed.
	status := func(token string) (int, string) {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool()}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, url+"/jobs?stale=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET /jobs: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	hup := func(wantLog string, n int) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, 5*time.Second, func() error {
			if got := strings.Count(logs.String(), wantLog); got < n {
				return fmt.Errorf("%d log lines %q, want %d", got, wantLog, n)
			}
			return nil
		})
	}

	code, serial := status(tokOld)
	if code != http.StatusOK {
		t.Fatalf("old token before the reload: %d", code)
	}
	writeTokens("admin " + tokAdmin + "\nclient " + tokNew + "\n")
	ca.Files(t, dir, ca.Issue(t, "n1"), "n1") // a new certificate at the same paths
	hup("SIGHUP: reloaded", 1)
	if code, _ := status(tokOld); code != http.StatusUnauthorized {
		t.Errorf("old token after the reload: %d, want 401", code)
	}
	code, serial2 := status(tokNew)
	if code != http.StatusOK {
		t.Errorf("new token after the reload: %d, want 200", code)
	}
	if serial2 == serial {
		t.Errorf("the server still shows certificate %s after the reload", serial)
	}

	writeTokens("client short\n")
	hup("SIGHUP: reload failed", 1)
	if code, serial3 := status(tokNew); code != http.StatusOK || serial3 != serial2 {
		t.Errorf("after a failed reload: token %d, certificate %s; want 200 and %s kept", code, serial3, serial2)
	}
	if strings.Contains(logs.String(), tokNew) || strings.Contains(logs.String(), tokOld) {
		t.Error("a token was logged")
	}
}

// TestForgetWorkersAfterReachesTheLeader: the flag sets the leader's
// admission config; its default is the documented 24h.
func TestForgetWorkersAfterReachesTheLeader(t *testing.T) {
	for args, want := range map[string]time.Duration{"": 24 * time.Hour, "--forget-workers-after=90m": 90 * time.Minute, "--forget-workers-after=0": 0} {
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		var f serverFlags
		f.register(fs)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		var nc wnode.Config
		if err := f.gang.configure(&nc); err != nil {
			t.Fatal(err)
		}
		if got := nc.Leader.Admission.ForgetWorkersAfter; got != want {
			t.Errorf("%q: ForgetWorkersAfter = %s, want %s", args, got, want)
		}
	}
}

// TestMaxWorkersPerTokenReachesTheAPI: the flag sets the API's cap; its
// default is the documented 1000, and below 1 it is refused.
func TestMaxWorkersPerTokenReachesTheAPI(t *testing.T) {
	for args, want := range map[string]int{"": 1000, "--max-workers-per-token=5": 5, "--max-workers-per-token=0": 0} {
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		var f serverFlags
		f.register(fs)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		var nc wnode.Config
		err := f.gang.configure(&nc)
		switch {
		case want == 0 && (err == nil || !strings.Contains(err.Error(), "--max-workers-per-token")):
			t.Errorf("%q: %v, want it refused naming the flag", args, err)
		case want > 0 && (err != nil || nc.API.MaxWorkersPerToken != want):
			t.Errorf("%q: MaxWorkersPerToken = %d (%v), want %d", args, nc.API.MaxWorkersPerToken, err, want)
		}
	}
}
