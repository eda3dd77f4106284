package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Config configures a Client. Build it from DefaultConfig and fill Servers.
type Config struct {
	// Servers are the base URLs of the scheduler nodes, like
	// "http://127.0.0.1:7001". Requests start at the first and move to the
	// next on failure. Required.
	Servers []string

	// HTTPClient sends the requests. Its Timeout bounds every request except
	// Claim and Next, which are bounded by their long-poll wait plus 10s
	// instead, and Backup and Restore, bounded by ctx only. When nil, New
	// builds one with its own transport, TLS and a 30s timeout.
	HTTPClient *http.Client

	// TLS configures https:// servers (the CAs to trust, a client
	// certificate) of the HTTP client New builds; ignored when HTTPClient is
	// set. When nil, the system's CAs are trusted.
	TLS *tls.Config

	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string

	// Rounds is how many times each server is tried for one request before
	// giving up. Defaults to 5; must be at least 1.
	Rounds int

	// Backoff is the pause after a round in which every server failed; it
	// doubles each round, up to 2s. Defaults to 100ms; must not be negative.
	Backoff time.Duration

	// StaleReads makes every read (GET of jobs, gangs, workers, queues,
	// pauses and schedules) ask for the answering node's state as it is
	// (?stale=1), without waiting for it to apply the leader's commit
	// index: it answers during an election and costs the leader nothing,
	// but may miss the latest writes. By default reads are consistent:
	// they see every write acknowledged before them (docs/api.md, Reads on
	// any node).
	StaleReads bool

	// Logger receives failover messages at debug and warn level. When nil,
	// nothing is logged.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in and no
// Servers. HTTPClient stays nil: New builds one, with TLS.
func DefaultConfig() Config {
	return Config{
		Rounds:  5,
		Backoff: 100 * time.Millisecond,
		Logger:  slog.New(slog.DiscardHandler),
	}
}

// Validate reports the first field that is out of bounds, naming it.
func (c Config) Validate() error {
	if len(c.Servers) == 0 {
		return errors.New("client: Config.Servers must list at least one URL")
	}
	for i, s := range c.Servers {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("client: Config.Servers[%d]: %w", i, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("client: Config.Servers[%d]: %q must be an http:// or https:// URL with a host", i, s)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("client: Config.Servers[%d]: %q must not have a query or fragment", i, s)
		}
	}
	if c.Rounds < 1 {
		return fmt.Errorf("client: Config.Rounds must be at least 1, got %d", c.Rounds)
	}
	if c.Backoff < 0 {
		return fmt.Errorf("client: Config.Backoff must not be negative, got %s", c.Backoff)
	}
	return nil
}

// newHTTPClient returns an HTTP client with a transport of its own, so that
// Close can drop its idle connections without touching anybody else's.
func newHTTPClient(tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
