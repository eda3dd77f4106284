package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// The bench's HTTP: one keep-alive client, call and do (with retries), and
// the reading of /health, /cluster and /metrics. worker/client is not used
// here: the bench measures single requests and classifies each reply
// itself (outcome).

// newHTTPClient is a keep-alive client holding up to conns idle
// connections per node, without compression or proxies.
func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4 * conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr}
}

// call sends one request and decodes a 2xx JSON reply into out. A non-nil
// error is a transport failure or an unreadable reply.
func (b *bencher) call(ctx context.Context, method, u string, body []byte, out any) (int, error) {
	return b.callPrefer(ctx, method, u, body, "", out)
}

// callPrefer is call with the Prefer header prefer (none when empty).
func (b *bencher) callPrefer(ctx context.Context, method, u string, body []byte, prefer string, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if prefer != "" {
		req.Header.Set(wire.HeaderPrefer, prefer)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var e wire.Error
		_ = json.Unmarshal(data, &e)
		return resp.StatusCode, fmt.Errorf("%s %s: %s (%s)", method, u, e.Error, e.Code)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode reply of %s %s: %w", method, u, err)
		}
	}
	return resp.StatusCode, nil
}

// do is call that retries while the reply says nothing was done (no
// leader, shedding load) for up to benchRetryFor, counting each retry in
// errs (if not nil).
func (b *bencher) do(ctx context.Context, method, u string, body []byte, out any, errs *atomic.Int64) (int, error) {
	return b.doPrefer(ctx, method, u, body, "", out, errs)
}

// doPrefer is do with the Prefer header prefer (none when empty).
func (b *bencher) doPrefer(ctx context.Context, method, u string, body []byte, prefer string, out any, errs *atomic.Int64) (int, error) {
	deadline := time.Now().Add(benchRetryFor)
	pause := 10 * time.Millisecond
	for {
		st, err := b.callPrefer(ctx, method, u, body, prefer, out)
		if classify(st, err) != outRetry || time.Now().After(deadline) || ctx.Err() != nil {
			return st, err
		}
		if errs != nil {
			errs.Add(1)
		}
		b.noteError("retrying", st, err)
		sleepCtx(ctx, pause)
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// outcome sorts a reply by what the caller may conclude.
type outcome int

const (
	outOK       outcome = iota // 2xx
	outRetry                   // 429 or 503: nothing was done
	outUnknown                 // transport failure, 5xx: may have been done
	outRejected                // other 4xx
)

func classify(status int, err error) outcome {
	switch {
	case status/100 == 2 && err == nil:
		return outOK
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return outRetry
	case status >= 400 && status < 500:
		return outRejected
	}
	return outUnknown
}

// healthy reports whether every node answers /health with the same leader
// and that leader's /cluster lists every node with its HTTP address.
func (b *bencher) healthy(ctx context.Context, urls []string) bool {
	leader := ""
	for _, u := range urls {
		var h wire.Health
		if st, err := b.call(ctx, http.MethodGet, u+"/health", nil, &h); err != nil || st != http.StatusOK {
			return false
		}
		if leader != "" && h.Leader != leader {
			return false
		}
		leader = h.Leader
	}
	var c wire.Cluster
	if _, err := b.call(ctx, http.MethodGet, urls[0]+"/cluster", nil, &c); err != nil || len(c.Nodes) != len(urls) {
		return false
	}
	for _, n := range c.Nodes {
		if n.HTTP == "" {
			return false
		}
	}
	return true
}

// roles finds the leader (through /health) and the followers' URLs,
// waiting up to benchRetryFor for an election to end.
func (b *bencher) roles(ctx context.Context) (leader string, followers []string, err error) {
	werr := poll.True(ctx, benchRetryFor, 50*time.Millisecond, func() bool {
		leader, followers, err = b.rolesOnce(ctx)
		return err == nil
	})
	if err == nil {
		err = werr
	}
	return leader, followers, err
}

func (b *bencher) rolesOnce(ctx context.Context) (leader string, followers []string, err error) {
	for _, u := range b.nodes {
		var h wire.Health
		if _, err = b.call(ctx, http.MethodGet, u+"/health", nil, &h); err != nil {
			continue
		}
		var c wire.Cluster
		if _, err = b.call(ctx, http.MethodGet, u+"/cluster", nil, &c); err != nil {
			continue
		}
		followers = nil
		for _, n := range c.Nodes {
			if n.ID == h.Leader {
				leader = strings.TrimRight(n.HTTP, "/")
			} else if n.HTTP != "" {
				followers = append(followers, strings.TrimRight(n.HTTP, "/"))
			}
		}
		if leader != "" {
			return leader, followers, nil
		}
		err = fmt.Errorf("node %s knows no leader address", u)
	}
	return "", nil, fmt.Errorf("find the leader: %w", err)
}

// metricsText is a node's GET /metrics, or "" if it does not answer.
func (b *bencher) metricsText(ctx context.Context, node string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, node+"/metrics", nil)
	if err != nil {
		return ""
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// raftCounters reads the leader's proposer counters and term from
// /metrics: entries, commands and term (zeros if unreadable).
func (b *bencher) raftCounters(ctx context.Context, leader string) [3]float64 {
	var out [3]float64
	names := []string{"workron_raft_entries_proposed_total", "workron_raft_commands_proposed_total", "workron_raft_term"}
	for line := range strings.Lines(b.metricsText(ctx, leader)) {
		name, val, _ := strings.Cut(strings.TrimSpace(line), " ")
		if i := slices.Index(names, name); i >= 0 {
			out[i], _ = strconv.ParseFloat(val, 64)
		}
	}
	return out
}
