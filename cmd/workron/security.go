package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/workron/workron/api"
	"github.com/workron/workron/fsm"
	wnode "github.com/workron/workron/node" // "node" is a type of the e2e tests
	"github.com/workron/workron/worker/client"
)

// minRestoreBytes is the least --max-restore-bytes takes.
const minRestoreBytes = 1 << 20

// securityFlags are the server's authentication, TLS and request-limit flags.
type securityFlags struct {
	tokenFile              string
	metricsOpen            bool
	tlsCert, tlsKey, tlsCA string

	maxBodyBytes      int64
	maxBodyInFlight   int64
	maxRestoreBytes   int64
	maxHeaderBytes    int
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	maxLongPolls      int
	maxConnections    int
	allowedHosts      string
}

func (f *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.tokenFile, "auth-token-file", "", "require bearer tokens listed in this file (lines: ROLE[,ROLE] TOKEN [NAME]; roles admin, client, worker)")
	fs.BoolVar(&f.metricsOpen, "metrics-open", false, "serve GET /metrics without a token even with --auth-token-file")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the PEM key of --tls-cert")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM CA that signed every node's certificate: turns on mutual TLS for Raft and verifies peers")
	fs.Int64Var(&f.maxBodyBytes, "max-body-bytes", 1<<20, "largest request body, except batch submits (413 beyond)")
	fs.Int64Var(&f.maxBodyInFlight, "max-body-bytes-in-flight", api.DefaultConfig().MaxBodyBytesInFlight,
		"most bytes of request bodies this node holds at once (taken before a body is read, given back once it is answered); beyond, a request gets 503 busy with Retry-After, its body unread")
	fs.Int64Var(&f.maxRestoreBytes, "max-restore-bytes", api.DefaultConfig().MaxRestoreBytes,
		"largest backup POST /restore takes, streamed to a file in the data directory, never into memory (413 beyond)")
	fs.IntVar(&f.maxHeaderBytes, "max-header-bytes", 64<<10, "largest request header block (431 beyond)")
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send its request headers")
	fs.DurationVar(&f.readTimeout, "read-timeout", 60*time.Second, "time a client has to send a whole request")
	fs.DurationVar(&f.writeTimeout, "write-timeout", 0, "time to answer a request, long-polls included (default --max-wait + 30s)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fs.IntVar(&f.maxLongPolls, "max-long-polls", 1024, "claims that may long-poll on this node at once; beyond, a claim with no ready job gets 429")
	fs.IntVar(&f.maxConnections, "max-connections", wnode.DefaultMaxConnections,
		"most HTTP connections open at once; beyond, a new one closes the oldest that carries no request, or waits (0 = no cap)")
	fs.StringVar(&f.allowedHosts, "allowed-hosts", "",
		"host names (comma-separated) the API answers to besides IP addresses, localhost and --advertise-http's host; a node on loopback, or with this flag, refuses other Host headers (DNS rebinding); * allows any")
}

// security is what the flags load.
type security struct {
	tokens *api.Tokens   // nil: no authentication
	tls    *api.TLSFiles // nil: plain HTTP
	raft   *tls.Config   // nil: plain TCP Raft (no --tls-ca)
	warn   []string      // said at start, with the exposure warnings
}

// load reads the token file and the certificates the flags name.
func (f *securityFlags) load() (*security, error) {
	sec := &security{}
	if f.tokenFile != "" {
		t, err := api.LoadTokens(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--auth-token-file: %w", err)
		}
		sec.tokens = t
		if fi, err := os.Stat(f.tokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			sec.warn = append(sec.warn, fmt.Sprintf("SECURITY: the token file %s is readable by other users (mode %s): chmod 600 it", f.tokenFile, fi.Mode().Perm()))
		}
		if t.NodeToken() == "" {
			sec.warn = append(sec.warn, "the token file holds no admin token: this node cannot authenticate to its peers, so --join fails")
		}
	}
	switch {
	case f.tlsCert != "" || f.tlsKey != "":
		t, err := api.LoadTLS(f.tlsCert, f.tlsKey, f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key/--tls-ca: %w", err)
		}
		sec.tls, sec.raft = t, t.Raft()
	case f.tlsCA != "":
		return nil, errors.New("--tls-ca needs --tls-cert and --tls-key: a node presents its own certificate to its peers")
	}
	if f.maxBodyBytes < 1024 {
		return nil, fmt.Errorf("--max-body-bytes must be at least 1024, got %d", f.maxBodyBytes)
	}
	if least := max(f.maxBodyBytes, api.DefaultConfig().MaxBatchBodyBytes, fsm.MaxCheckpointBytes); f.maxBodyInFlight < least {
		return nil, fmt.Errorf("--max-body-bytes-in-flight must be at least the largest body a route takes (%d bytes), got %d", least, f.maxBodyInFlight)
	}
	if f.maxRestoreBytes < minRestoreBytes {
		return nil, fmt.Errorf("--max-restore-bytes must be at least %d (1 MiB), got %d", minRestoreBytes, f.maxRestoreBytes)
	}
	if f.maxHeaderBytes < 4096 {
		return nil, fmt.Errorf("--max-header-bytes must be at least 4096, got %d", f.maxHeaderBytes)
	}
	if f.maxLongPolls < 1 {
		return nil, fmt.Errorf("--max-long-polls must be at least 1, got %d", f.maxLongPolls)
	}
	if f.maxConnections < 0 {
		return nil, fmt.Errorf("--max-connections must not be negative (0 = no cap), got %d", f.maxConnections)
	}
	for _, h := range splitList(f.allowedHosts) {
		if strings.ContainsAny(h, "/ ") {
			return nil, fmt.Errorf("--allowed-hosts: %q is no host name (give names like jobs.example.com, without scheme or path)", h)
		}
	}
	return sec, nil
}

// reload reads the token file and the certificate and key again and swaps
// them in, for requests and handshakes from now on (SIGHUP). The CA and
// every other flag keep their values from the start. On any error nothing
// changes. It returns what it reloaded.
func (f *securityFlags) reload(sec *security) ([]string, error) {
	var tokens *api.Tokens
	var cert *api.TLSFiles
	var what []string
	if sec.tokens != nil {
		t, err := api.LoadTokens(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("reload --auth-token-file: %w", err)
		}
		tokens, what = t, append(what, "tokens "+f.tokenFile)
	}
	if sec.tls != nil {
		t, err := api.LoadTLS(f.tlsCert, f.tlsKey, "")
		if err != nil {
			return nil, fmt.Errorf("reload --tls-cert/--tls-key: %w", err)
		}
		cert, what = t, append(what, "certificate "+f.tlsCert)
	}
	if tokens != nil {
		sec.tokens.Swap(tokens)
	}
	if cert != nil {
		sec.tls.SwapCert(cert)
	}
	return what, nil
}

// configure fills the security and limit fields of the node's config:
// tokens and TLS (which node.Start hands to the API and the Raft
// transport), body and long-poll caps, and the HTTP server's limits.
func (s *security) configure(f *securityFlags, nc *wnode.Config) {
	nc.API.Auth, nc.API.MetricsOpen = s.tokens, f.metricsOpen
	nc.TLS = s.tls
	nc.API.MaxBodyBytes, nc.API.MaxLongPolls = f.maxBodyBytes, f.maxLongPolls
	nc.API.MaxBodyBytesInFlight, nc.API.MaxRestoreBytes = f.maxBodyInFlight, f.maxRestoreBytes
	nc.ReadHeaderTimeout, nc.ReadTimeout, nc.WriteTimeout = f.readHeaderTimeout, f.readTimeout, max(f.writeTimeout, 0)
	nc.IdleTimeout, nc.MaxHeaderBytes = f.idleTimeout, f.maxHeaderBytes
	nc.MaxConnections, nc.API.AllowedHosts = f.maxConnections, splitList(f.allowedHosts)
}

// warnExposure says, loudly, when a node is reachable from other hosts
// without the protection the flags could give it.
func (s *security) warnExposure(logger *slog.Logger, httpAddr, raftAddr string) {
	for _, w := range s.warn {
		logger.Warn(w)
	}
	if !loopback(httpAddr) {
		switch {
		case s.tokens == nil:
			logger.Warn("SECURITY: the HTTP API listens on " + httpAddr + ", beyond this host, and requires no token: " +
				"anyone who can reach it can submit shell commands for your workers to run, cancel jobs and change the cluster. " +
				"Give --auth-token-file (and --tls-cert/--tls-key), or listen on 127.0.0.1")
		case s.tls == nil:
			logger.Warn("SECURITY: the HTTP API listens on " + httpAddr + ", beyond this host, without TLS: " +
				"bearer tokens and job data cross the network in clear text. Give --tls-cert and --tls-key")
		}
	}
	if !loopback(raftAddr) && s.raft == nil {
		logger.Warn("SECURITY: the Raft transport listens on " + raftAddr + ", beyond this host, without mutual TLS: " +
			"any host that can reach it can vote, join the cluster or inject log entries. " +
			"Give --tls-cert, --tls-key and --tls-ca, or keep the Raft port on a private network")
	}
}

// loopback reports whether a host:port listens on loopback only.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return api.IsLoopbackHost(host)
}

// clientSecurity are the flags of the commands that talk to a cluster:
// the token to send and the CA to trust.
type clientSecurity struct {
	token, tokenFile, ca string
}

func (c *clientSecurity) register(fs *flag.FlagSet, tokenFlag string) {
	if tokenFlag == "token" {
		fs.StringVar(&c.token, "token", os.Getenv("WORKRON_TOKEN"), "bearer token to send (env WORKRON_TOKEN, which other users cannot read in ps)")
	} else {
		fs.StringVar(&c.tokenFile, "token-file", "", "file holding the bearer token to send (default: env WORKRON_TOKEN)")
	}
	fs.StringVar(&c.ca, "tls-ca", os.Getenv("WORKRON_TLS_CA"), "PEM CA to trust for https:// servers besides the system's (env WORKRON_TLS_CA)")
}

// bearer is the token to send: from --token, --token-file or WORKRON_TOKEN.
func (c *clientSecurity) bearer() (string, error) {
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if c.token != "" {
		return c.token, nil
	}
	return os.Getenv("WORKRON_TOKEN"), nil
}

// httpClient is an HTTP client that trusts --tls-ca; timeout 0 means none.
func (c *clientSecurity) httpClient(timeout time.Duration) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	if c.ca != "" {
		pem, err := os.ReadFile(c.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: %s holds no PEM certificate", c.ca)
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}

// newClient is a Go client for servers with the token and CA of the flags.
func (c *clientSecurity) newClient(servers []string, logger *slog.Logger, mutate ...func(*client.Config)) (*client.Client, error) {
	tok, err := c.bearer()
	if err != nil {
		return nil, err
	}
	hc, err := c.httpClient(30 * time.Second)
	if err != nil {
		return nil, err
	}
	cfg := client.DefaultConfig()
	cfg.Servers, cfg.Token, cfg.HTTPClient = servers, tok, hc
	if logger != nil {
		cfg.Logger = logger
	}
	for _, m := range mutate {
		m(&cfg)
	}
	return client.New(cfg)
}

// selfClient is a client for a node's own API, for dev's in-process
// worker: it sends the node's credential (the token file's first admin
// token) and trusts --tls-ca. Nil when the node needs neither.
func (f *securityFlags) selfClient(url string, logger *slog.Logger) (*client.Client, error) {
	if f.tokenFile == "" && f.tlsCert == "" {
		return nil, nil
	}
	c := clientSecurity{ca: f.tlsCA}
	if f.tokenFile != "" {
		t, err := api.LoadTokens(f.tokenFile)
		if err != nil {
			return nil, err
		}
		c.token = t.NodeToken()
	}
	return c.newClient([]string{url}, logger)
}
