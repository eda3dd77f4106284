// Package hostile is Workron's hostile-load suite: it starts a real
// three-node cluster of workron processes with tokens, runs each attack of
// issue #28 against it (floods of oversized bodies, a claim whose reply
// would carry huge parent results, worker-id floods, a giant cascade, idle
// connections, pauses and snoozes meant to freeze a queue, cross-site
// requests), and measures what each cost the cluster: the Raft term, the
// latency of /health on every node, each node's memory, and whether every
// job accepted meanwhile still finished.
//
// It owns the attacks and their checks; it never decides how the server
// should refuse (any bounded, clear refusal passes), and it asserts no
// speed unless asked (Config.Strict): the figures are printed for people to
// read, as the benchmarks' are.
package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/workron/workron/internal/testkit/proccluster"
)

// Limits the issue sets for every attack (Config.Strict checks all three;
// otherwise only MaxRSS, which does not depend on how busy the machine is).
const (
	MaxRSS          = 1 << 30                // bytes of any node's resident memory
	MaxHealthP99    = 500 * time.Millisecond // /health latency at p99, every node
	healthInterval  = 50 * time.Millisecond
	rssInterval     = 100 * time.Millisecond
	canaryInterval  = 100 * time.Millisecond
	drainTimeout    = 2 * time.Minute
	attackTimeout   = 5 * time.Minute
	tokenAdmin      = "hostile-admin-token-0123456789"
	tokenClient     = "hostile-client-token-0123456789"
	tokenWorker     = "hostile-worker-token-0123456789"
	tokenOtherTenat = "hostile-other-token-0123456789"
)

// Config says what Run does.
type Config struct {
	// Bin is the workron binary. Required.
	Bin string
	// Dir holds the nodes' data and logs. Required.
	Dir string
	// Short runs each attack at a smaller size (CI); the floods keep their
	// parallelism.
	Short bool
	// Parallel is how many requests a flood sends at once. Defaults to 200.
	Parallel int
	// Attacks names the attacks to run (Names lists them). Empty: all.
	Attacks []string
	// Strict also fails an attack on a term change or a /health p99 over
	// MaxHealthP99 (the long mode); without it these are only reported.
	Strict bool
	// Log receives progress lines. Defaults to io.Discard.
	Log io.Writer
}

// Result is what one attack did and cost.
type Result struct {
	Attack   string         `json:"attack"`
	Took     time.Duration  `json:"took_ns"`
	Requests int            `json:"requests"`
	Statuses map[int]int    `json:"statuses"` // HTTP status → count (0: no reply)
	Figures  map[string]any `json:"figures,omitempty"`
	// TermBefore and TermAfter are the cluster's term around the attack.
	TermBefore uint64 `json:"term_before"`
	TermAfter  uint64 `json:"term_after"`
	// HealthP50, HealthP99 and HealthMax are /health's latency over every
	// node during the attack; HealthFailed counts probes with no 200.
	HealthP50    time.Duration `json:"health_p50_ns"`
	HealthP99    time.Duration `json:"health_p99_ns"`
	HealthMax    time.Duration `json:"health_max_ns"`
	HealthFailed int           `json:"health_failed"`
	// MaxRSS is the highest resident memory seen of any node, in bytes.
	MaxRSS int64 `json:"max_rss"`
	// Failures are the checks that did not hold.
	Failures []string `json:"failures,omitempty"`
}

// Report is the whole run.
type Report struct {
	Results []Result `json:"results"`
	// CanariesAccepted jobs were accepted during the attacks, and
	// CanariesLost of them did not finish afterwards.
	CanariesAccepted int      `json:"canaries_accepted"`
	CanariesLost     []string `json:"canaries_lost,omitempty"`
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	if len(r.CanariesLost) > 0 {
		return true
	}
	for _, res := range r.Results {
		if len(res.Failures) > 0 {
			return true
		}
	}
	return false
}

// attack is one entry of the suite: run sends the attack and checks what
// it did to the state (the suite measures the rest).
type attack struct {
	name string
	doc  string
	run  func(ctx context.Context, e *env, res *Result) error
}

// Names lists the attacks in the order Run runs them.
func Names() []string {
	out := make([]string, len(attacks))
	for i, a := range attacks {
		out[i] = a.name
	}
	return out
}

// Describe is each attack's one-line description, in order.
func Describe() []string {
	out := make([]string, len(attacks))
	for i, a := range attacks {
		out[i] = a.name + ": " + a.doc
	}
	return out
}

// Run starts the cluster, runs the attacks and returns the report. The
// error is for a run that could not be made (no cluster); a check that
// failed is in the report (Report.Failed).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Bin == "" || cfg.Dir == "" {
		return nil, errors.New("hostile: Config.Bin and Config.Dir are required")
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 200
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	for _, name := range cfg.Attacks {
		if !slices.Contains(Names(), name) {
			return nil, fmt.Errorf("hostile: unknown attack %q (have %s)", name, strings.Join(Names(), ", "))
		}
	}
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	rep := &Report{}
	canaries := e.startCanaries(ctx)
	for _, a := range attacks {
		if len(cfg.Attacks) > 0 && !slices.Contains(cfg.Attacks, a.name) {
			continue
		}
		fmt.Fprintf(cfg.Log, "hostile: %s: %s\n", a.name, a.doc)
		rep.Results = append(rep.Results, e.measure(ctx, a))
		r := rep.Results[len(rep.Results)-1]
		fmt.Fprintf(cfg.Log, "hostile: %s: %d requests %v, term %d→%d, /health p99 %v, max RSS %d MiB, failures %d\n",
			a.name, r.Requests, r.Statuses, r.TermBefore, r.TermAfter, r.HealthP99.Round(time.Millisecond), r.MaxRSS>>20, len(r.Failures))
	}
	accepted := canaries.stop()
	rep.CanariesAccepted = len(accepted)
	fmt.Fprintf(cfg.Log, "hostile: draining %d canary jobs\n", len(accepted))
	lost, err := e.drainCanaries(ctx, accepted)
	if err != nil {
		return rep, fmt.Errorf("hostile: drain canaries: %w", err)
	}
	rep.CanariesLost = lost
	return rep, nil
}

// measure runs a with the cluster watched, and fills its Result.
func (e *env) measure(ctx context.Context, a attack) Result {
	res := Result{Attack: a.name, Statuses: map[int]int{}, Figures: map[string]any{}}
	res.TermBefore = e.term(ctx)
	w := e.watch(ctx)
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, attackTimeout)
	err := a.run(actx, e, &res)
	cancel()
	res.Took = time.Since(start)
	// Let the cluster settle a moment under watch: damage often shows
	// just after the flood (a collection, an election).
	settle(ctx, time.Second)
	w.stop(&res)
	res.TermAfter = e.term(ctx)
	if err != nil {
		res.Failures = append(res.Failures, err.Error())
	}
	if res.MaxRSS > MaxRSS {
		res.Failures = append(res.Failures, fmt.Sprintf("a node reached %d MiB resident, over %d MiB", res.MaxRSS>>20, MaxRSS>>20))
	}
	if e.cfg.Strict {
		if res.TermAfter != res.TermBefore {
			res.Failures = append(res.Failures, fmt.Sprintf("term changed %d → %d (an election)", res.TermBefore, res.TermAfter))
		}
		if res.HealthP99 > MaxHealthP99 {
			res.Failures = append(res.Failures, fmt.Sprintf("/health p99 %v, over %v", res.HealthP99, MaxHealthP99))
		}
	}
	return res
}

func settle(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// env is the cluster under attack and the clients that attack it.
type env struct {
	cfg     Config
	cluster *proccluster.Cluster
	hc      *http.Client // for the attacks: many connections, long timeout
	probe   *http.Client // for /health probes and checks: its own connections
}

func startEnv(ctx context.Context, cfg Config) (*env, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "n1")); err == nil {
		return nil, fmt.Errorf("hostile: %s holds an earlier run's data: give an empty directory", cfg.Dir)
	}
	tokens := filepath.Join(cfg.Dir, "tokens")
	data := fmt.Sprintf("admin %s ops\nclient %s tenant-a\nworker %s workers\nclient %s tenant-b\n",
		tokenAdmin, tokenClient, tokenWorker, tokenOtherTenat)
	if err := os.WriteFile(tokens, []byte(data), 0o600); err != nil {
		return nil, fmt.Errorf("hostile: token file: %w", err)
	}
	// The probe client is also the harness's (proccluster reads /cluster
	// with it): requests without a token of their own carry the admin's.
	probe := &http.Client{Timeout: 10 * time.Second, Transport: bearer{tokenAdmin, &http.Transport{MaxIdleConnsPerHost: 8}}}
	c, err := proccluster.Start(ctx, proccluster.Config{Bin: cfg.Bin, Dir: cfg.Dir, HTTP: probe,
		Args: []string{"--auth-token-file", tokens, "--log-level", "warn"}})
	if err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	e := &env{cfg: cfg, cluster: c, probe: probe,
		hc: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			MaxIdleConnsPerHost: cfg.Parallel, MaxConnsPerHost: 0, DisableCompression: true}}}
	if err := c.WaitFormed(ctx, 30*time.Second); err != nil {
		e.stop()
		return nil, fmt.Errorf("hostile: %w", err)
	}
	if err := e.registerWorker(ctx, workerID); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

func (e *env) stop() {
	e.cluster.Stop(5 * time.Second)
	if t, ok := e.hc.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	if t, ok := e.probe.Transport.(bearer); ok {
		t.base.CloseIdleConnections()
	}
}

// bearer adds a token to requests that carry none.
type bearer struct {
	token string
	base  *http.Transport
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}
