//go:build unix

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// requestTimeout bounds every client request; a node that is paused or cut
// off makes requests end here, with an unknown outcome.
const requestTimeout = 8 * time.Second

// load runs submitters, virtual workers and readers against the cluster and
// records every operation.
type load struct {
	c    *cluster
	rec  *recorder
	seed uint64
	api  *nodeClients // submitters' and readers'

	mu       sync.Mutex
	specs    map[string]jobSpec // by key
	accepted map[string]string  // key -> job id, from 2xx submits
	ids      []string           // accepted job ids, for readers
	invalid  []string           // 4xx the harness did not expect
	// durSpecs and durAccepted are the durable jobs (durable.go): by
	// key, and key -> job id from 2xx submits. Their submits are not
	// recorded: their histories are checked against the ledger instead.
	durSpecs    map[string]durableSpec
	durAccepted map[string]string
	events      map[string]eventSend // by job key: its event's sending

	vworkers []*vworker
	stats    loadStats
}

type loadStats struct {
	submits, claims, heartbeats, reports, gets, crashes atomic.Int64
}

func newLoad(c *cluster, rec *recorder, seed uint64, virtual int) *load {
	tr := newTransport()
	l := &load{c: c, rec: rec, seed: seed, specs: make(map[string]jobSpec), accepted: make(map[string]string),
		durSpecs: make(map[string]durableSpec), durAccepted: make(map[string]string), events: make(map[string]eventSend),
		api: newNodeClients(&http.Client{Timeout: requestTimeout, Transport: tr}, tr)}
	for i := range virtual {
		ft := &faultyTransport{base: newTransport()}
		l.vworkers = append(l.vworkers, &vworker{id: "v" + strconv.Itoa(i+1), l: l, tr: ft,
			api: newNodeClients(&http.Client{Timeout: requestTimeout, Transport: ft}, ft.base)})
	}
	return l
}

// nodeClients holds one worker/client Client per node URL, sharing one
// HTTP client. Each has that one server and sends every request once, with
// no failover and no resend, so that each exchange is recorded as it went.
type nodeClients struct {
	hc    *http.Client
	idle  *http.Transport // whose idle connections closeIdle closes
	mu    sync.Mutex
	byURL map[string]*client.Client
}

func newNodeClients(hc *http.Client, idle *http.Transport) *nodeClients {
	return &nodeClients{hc: hc, idle: idle, byURL: make(map[string]*client.Client)}
}

// get returns the client of the node at url, made on first use.
func (n *nodeClients) get(url string) (*client.Client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cl, ok := n.byURL[url]; ok {
		return cl, nil
	}
	cfg := client.DefaultConfig()
	cfg.Servers, cfg.HTTPClient, cfg.Rounds = []string{url}, n.hc, 1
	cl, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	n.byURL[url] = cl
	return cl, nil
}

func newTransport() *http.Transport {
	return &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 5 * time.Second}
}

// closeIdle closes the clients' idle connections.
func (l *load) closeIdle() {
	l.api.idle.CloseIdleConnections()
	for _, w := range l.vworkers {
		w.api.idle.CloseIdleConnections()
	}
}

// isVirtual reports whether a worker id is one of the load's virtual workers.
func (l *load) isVirtual(id string) bool {
	for _, w := range l.vworkers {
		if w.id == id {
			return true
		}
	}
	return false
}

// reply is an HTTP exchange's result.
type reply struct {
	code int
	body []byte
	err  error
}

func (r reply) outcome() Outcome {
	switch {
	case r.err != nil:
		return OutUnknown
	case r.code/100 == 2:
		return OutOK
	case r.code == http.StatusConflict:
		return OutRejected
	case r.code == http.StatusNotFound:
		return OutNotFound
	case r.code == http.StatusServiceUnavailable, r.code == http.StatusTooManyRequests:
		return OutNoEffect
	case r.code >= 500:
		return OutUnknown
	}
	return OutInvalid
}

func (r reply) errText() string {
	if r.err != nil {
		return r.err.Error()
	}
	if r.code/100 != 2 {
		return string(bytes.TrimSpace(r.body))
	}
	return ""
}

// do sends one request to a random node, once. A reply that did not come
// whole (a transport error, a 2xx body cut short) has err set: its outcome
// is unknown.
func (l *load) do(ctx context.Context, api *nodeClients, rng *rand.Rand, method, path string, body any) reply {
	cl, err := api.get(l.c.nodes[rng.IntN(len(l.c.nodes))].URL)
	if err != nil {
		return reply{err: err}
	}
	resp, err := cl.Do(ctx, client.Request{Method: method, Path: path, Body: body, Single: true})
	if err != nil && (client.StatusOf(err) == 0 || errors.Is(err, client.ErrIncompleteReply)) {
		return reply{code: resp.Status, body: resp.Body, err: err}
	}
	return reply{code: resp.Status, body: resp.Body}
}

func (l *load) noteInvalid(op Op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.invalid) < 20 {
		l.invalid = append(l.invalid, fmt.Sprintf("%s %s %s: HTTP %d %s", op.Kind, op.Job, op.Key, op.Code, op.Err))
	}
}

// submitters submit jobs at rate per second until ctx ends. Every job is
// resent with its idempotency key until a 2xx, or until stop ends.
func (l *load) submitters(ctx, stop context.Context, rate float64) {
	rng := rand.New(rand.NewPCG(l.seed, 1))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		spec := randomSpec(rng, i)
		l.mu.Lock()
		l.specs[spec.key] = spec
		l.mu.Unlock()
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		seed := rng.Uint64()
		wg.Go(func() {
			defer func() { <-sem }()
			l.submit(stop, spec, rand.New(rand.NewPCG(seed, 2)))
		})
	}
}

func (l *load) submit(ctx context.Context, spec jobSpec, rng *rand.Rand) {
	client := l.rec.client()
	req := spec.request()
	for try := 0; ctx.Err() == nil; try++ {
		if try > 0 {
			pause := min(20*time.Millisecond<<min(try, 5), 500*time.Millisecond)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause/2 + rand.N(pause/2)):
			}
		}
		op := Op{Client: client, Kind: OpSubmit, Key: spec.key, Call: l.rec.now()}
		r := l.do(ctx, l.api, rng, http.MethodPost, "/jobs", req)
		op.Return, op.Code, op.Outcome, op.Err = l.rec.now(), r.code, r.outcome(), r.errText()
		l.stats.submits.Add(1)
		if op.Outcome == OutOK {
			var j wire.Job
			if err := json.Unmarshal(r.body, &j); err != nil || j.ID == "" {
				op.Outcome, op.Err = OutInvalid, "2xx without a job: "+string(r.body)
			} else {
				op.Job, op.Status, op.Attempts, op.Created = j.ID, j.Status, j.Attempts, r.code == http.StatusCreated
			}
		}
		l.rec.add(op)
		switch op.Outcome {
		case OutOK:
			l.mu.Lock()
			l.accepted[spec.key] = op.Job
			l.ids = append(l.ids, op.Job)
			l.mu.Unlock()
			return
		case OutInvalid, OutRejected, OutNotFound:
			l.noteInvalid(op)
			return
		}
	}
}

// durableSubmitters submit durable jobs at rate per second until ctx ends,
// each resent with its idempotency key until a 2xx, or until stop ends.
func (l *load) durableSubmitters(ctx, stop context.Context, rate float64) {
	if rate <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(l.seed, 5))
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		spec := randomDurableSpec(rng, i)
		l.mu.Lock()
		l.durSpecs[spec.key] = spec
		l.mu.Unlock()
		seed := rng.Uint64()
		wg.Go(func() { l.submitDurable(stop, spec, rand.New(rand.NewPCG(seed, 6))) })
	}
}

func (l *load) submitDurable(ctx context.Context, spec durableSpec, rng *rand.Rand) {
	req := spec.request()
	for try := 0; ctx.Err() == nil; try++ {
		if try > 0 {
			pause := min(20*time.Millisecond<<min(try, 5), 500*time.Millisecond)
			sleep(ctx, pause/2+rand.N(pause/2))
		}
		r := l.do(ctx, l.api, rng, http.MethodPost, "/jobs", req)
		switch r.outcome() {
		case OutOK:
			var j wire.Job
			if err := json.Unmarshal(r.body, &j); err != nil || j.ID == "" {
				l.noteInvalid(Op{Kind: OpSubmit, Key: spec.key, Code: r.code, Err: "2xx without a job: " + string(r.body)})
				return
			}
			l.mu.Lock()
			l.durAccepted[spec.key] = j.ID
			l.events[spec.key] = eventSend{Mode: spec.event}
			l.mu.Unlock()
			switch spec.event {
			case eventAfter:
				sleep(ctx, 2*time.Second+rand.N(3*time.Second))
				fallthrough
			case eventBefore:
				l.sendEvent(ctx, spec.key, 1, rng)
			}
			return
		case OutInvalid, OutRejected, OutNotFound:
			l.noteInvalid(Op{Kind: OpSubmit, Key: spec.key, Code: r.code, Err: r.errText()})
			return
		}
	}
}

// sendEvent sends event n of a durable job's key until a 2xx, or until
// ctx ends, and notes when it went and when it was accepted.
func (l *load) sendEvent(ctx context.Context, key string, n int, rng *rand.Rand) {
	payload, _ := json.Marshal(eventPayload{Key: key, N: n})
	req := wire.EventRequest{Name: durableEvent, Key: key, Payload: payload}
	call := time.Now().UnixNano()
	for try := 0; ctx.Err() == nil; try++ {
		if try > 0 {
			pause := min(20*time.Millisecond<<min(try, 5), 500*time.Millisecond)
			sleep(ctx, pause/2+rand.N(pause/2))
		}
		r := l.do(ctx, l.api, rng, http.MethodPost, "/events", req)
		switch r.outcome() {
		case OutOK:
			if n == 1 {
				l.mu.Lock()
				ev := l.events[key]
				ev.Call, ev.Return = call, time.Now().UnixNano()
				l.events[key] = ev
				l.mu.Unlock()
			}
			return
		case OutInvalid, OutRejected, OutNotFound:
			l.noteInvalid(Op{Kind: "event", Key: key, Code: r.code, Err: r.errText()})
			return
		}
	}
}

// rescueEvents sends a second event (n 2) to every durable job that was
// sent one: a wait whose first event was lost wakes on it, and the check
// sees which it got.
func (l *load) rescueEvents(ctx context.Context) {
	l.mu.Lock()
	var keys []string
	for key, ev := range l.events {
		if ev.Mode != eventNone {
			keys = append(keys, key)
			ev.Rescued = true
			l.events[key] = ev
		}
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(l.seed, 7))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, key := range keys {
		sem <- struct{}{}
		seed := rng.Uint64()
		wg.Go(func() {
			defer func() { <-sem }()
			l.sendEvent(ctx, key, 2, rand.New(rand.NewPCG(seed, 8)))
		})
	}
	wg.Wait()
}

// readers read random accepted jobs (consistent reads, through any node).
func (l *load) readers(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(l.seed, uint64(100+k)))
			client := l.rec.client()
			for ctx.Err() == nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Duration(20+rng.IntN(60)) * time.Millisecond):
				}
				l.mu.Lock()
				var id string
				if len(l.ids) > 0 {
					id = l.ids[rng.IntN(len(l.ids))]
				}
				l.mu.Unlock()
				if id == "" {
					continue
				}
				op := Op{Client: client, Kind: OpGet, Job: id, Call: l.rec.now()}
				r := l.do(ctx, l.api, rng, http.MethodGet, "/jobs/"+id, nil)
				op.Return, op.Code, op.Outcome, op.Err = l.rec.now(), r.code, r.outcome(), r.errText()
				l.stats.gets.Add(1)
				switch op.Outcome {
				case OutOK:
					var j wire.Job
					if err := json.Unmarshal(r.body, &j); err != nil {
						op.Outcome, op.Err = OutInvalid, err.Error()
						l.noteInvalid(op)
						continue
					}
					op.Status, op.Attempts, op.JobLease = j.Status, j.Attempts, j.Lease
				case OutNotFound:
				case OutInvalid, OutRejected:
					l.noteInvalid(op)
					continue
				default:
					continue // a read that failed tells nothing
				}
				l.rec.add(op)
			}
		})
	}
	wg.Wait()
}

// faultyTransport lets the harness cut a virtual worker off the network:
// while down, half the requests fail before they are sent and half are sent
// and their replies thrown away, so the worker cannot tell which.
type faultyTransport struct {
	base *http.Transport
	down atomic.Bool
	n    atomic.Uint64
}

var errNetDown = errors.New("chaos: worker network down")

func (t *faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.down.Load() {
		return t.base.RoundTrip(req)
	}
	if t.n.Add(1)%2 == 0 {
		return nil, errNetDown
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil, errNetDown
}
