package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
)

// attacks are the suite, in the order Run runs them: issue #28's list.
var attacks = []attack{
	{"cross_site", "a web page's requests (text/plain and form bodies, a cross-site Origin) try to submit a job", crossSite},
	{"metadata_flood", "parallel POST /jobs of ~870 KB holding 60,000 metadata entries each", metadataFlood},
	{"claim_queues_flood", "parallel claims naming 60,000 queues each", claimQueuesFlood},
	{"report_flood", "30 parallel 32 MiB POST /jobs/reports to a follower", reportFlood},
	{"parent_results", "one claim of 10 jobs, each depending on many parents with 64 KiB results", parentResults},
	{"freeze_queue", "a keyless job rate-limited for 24h, and a job snoozed over and over", freezeQueue},
	{"worker_ids", "one worker token registers thousands of worker ids; GET /workers and job reads after", workerIDs},
	{"cascade", "cancel the root of a huge fan of dependents while another tenant submits", cascade},
	{"idle_conns", "thousands of idle unauthenticated connections to a follower", idleConns},
}

// size picks a figure for the short or the long mode.
func (e *env) size(short, long int) int {
	if e.cfg.Short {
		return short
	}
	return long
}

// noneAccepted fails when any reply was a 2xx.
func noneAccepted(rs []reply) error {
	for _, r := range rs {
		if r.status/100 == 2 {
			return fmt.Errorf("a hostile request was accepted (%d): %s", r.status, truncate(r.body))
		}
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// countJobs counts the jobs of a queue with a status ("" any), up to 10,000.
func (e *env) countJobs(ctx context.Context, queue, status string) (int, error) {
	q := url.Values{"queue": {queue}, "limit": {"1000"}}
	if status != "" {
		q.Set("status", status)
	}
	n := 0
	for range 10 {
		var l wire.JobList
		if _, err := e.call(ctx, http.MethodGet, "/jobs?"+q.Encode(), tokenAdmin, nil, &l); err != nil {
			return n, err
		}
		n += len(l.Jobs)
		if l.NextCursor == "" {
			return n, nil
		}
		q.Set("cursor", l.NextCursor)
	}
	return n, nil
}

func crossSite(ctx context.Context, e *env, res *Result) error {
	const queue = "hostile-xsite"
	body := `{"command":"echo pwned","queue":"` + queue + `"}`
	forms := []struct{ ctype, body string }{
		{"text/plain", body},
		{"application/x-www-form-urlencoded", body},
		{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"" + body + "\"\r\n\r\n\r\n--x--\r\n"},
	}
	n := e.cfg.Parallel
	rs := e.flood(ctx, res, n, e.cfg.Parallel, func(i int) reply {
		f := forms[i%len(forms)]
		h := http.Header{"Content-Type": {f.ctype}, "Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
		// A browser sends no token; the suite's cluster has tokens, so
		// half the requests carry one to show the cross-site check itself
		// refuses them.
		tok := ""
		if i%2 == 0 {
			tok = tokenClient
		}
		return e.send(ctx, e.hc, http.MethodPost, e.cluster.Nodes[i%len(e.cluster.Nodes)].URL+"/jobs", tok, h, strings.NewReader(f.body))
	})
	if err := noneAccepted(rs); err != nil {
		return err
	}
	if k, err := e.countJobs(ctx, queue, ""); err != nil || k != 0 {
		return fmt.Errorf("queue %s holds %d jobs after the cross-site requests (err %v)", queue, k, err)
	}
	return nil
}

func metadataFlood(ctx context.Context, e *env, res *Result) error {
	var b bytes.Buffer
	b.WriteString(`{"command":"true","queue":"hostile-meta","metadata":{`)
	for i := range 60000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteString(`}}`)
	body := b.Bytes()
	res.Figures["body_bytes"] = len(body)
	rounds := e.size(1, 3)
	rs := e.flood(ctx, res, rounds*e.cfg.Parallel, e.cfg.Parallel, func(i int) reply {
		return e.send(ctx, e.hc, http.MethodPost, e.cluster.Nodes[i%len(e.cluster.Nodes)].URL+"/jobs", tokenClient, nil, bytes.NewReader(body))
	})
	if err := noneAccepted(rs); err != nil {
		return err
	}
	if k, err := e.countJobs(ctx, "hostile-meta", ""); err != nil || k != 0 {
		return fmt.Errorf("queue hostile-meta holds %d jobs (err %v)", k, err)
	}
	return nil
}

func claimQueuesFlood(ctx context.Context, e *env, res *Result) error {
	qs := make([]string, 60000)
	for i := range qs {
		qs[i] = fmt.Sprintf("q%d", i)
	}
	body, err := json.Marshal(wire.ClaimRequest{WorkerID: workerID, Queues: qs, Wait: "5s"})
	if err != nil {
		return err
	}
	res.Figures["body_bytes"] = len(body)
	rounds := e.size(1, 3)
	rs := e.flood(ctx, res, rounds*e.cfg.Parallel, e.cfg.Parallel, func(i int) reply {
		return e.send(ctx, e.hc, http.MethodPost, e.cluster.Nodes[i%len(e.cluster.Nodes)].URL+"/jobs/claim", tokenWorker, nil, bytes.NewReader(body))
	})
	return noneAccepted(rs)
}

// repeat is an endless run of one byte, n of them.
type repeat struct {
	b    byte
	left int64
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.left)
	for i := range p[:k] {
		p[i] = r.b
	}
	r.left -= k
	return int(k), nil
}

func reportFlood(ctx context.Context, e *env, res *Result) error {
	const size = 32 << 20
	follower := e.follower(ctx)
	n := 30
	rs := e.flood(ctx, res, e.size(n, 3*n), n, func(int) reply {
		body := io.MultiReader(strings.NewReader(`{"reports":[{"job_id":"nope","status":"done","output":"`),
			&repeat{b: 'A', left: size}, strings.NewReader(`"}]}`))
		return e.send(ctx, e.hc, http.MethodPost, follower+"/jobs/reports", tokenWorker, nil, body)
	})
	return noneAccepted(rs)
}

func parentResults(ctx context.Context, e *env, res *Result) error {
	parents, children := e.size(200, 1000), 10
	pq, cq := "hostile-parents", "hostile-children"
	if err := e.registerWorkerQueues(ctx, pq, cq); err != nil {
		return err
	}
	reqs := make([]wire.SubmitRequest, parents)
	for i := range reqs {
		reqs[i] = wire.SubmitRequest{Command: "true", Queue: pq}
	}
	ids, err := e.submitBatch(ctx, tokenClient, reqs)
	if err != nil {
		return err
	}
	// The result of each parent: a JSON string as large as a result may be.
	result, _ := json.Marshal(strings.Repeat("R", wire.MaxResultBytes-64))
	for done := 0; done < parents; {
		cr, _, err := e.claim(ctx, pq, 100)
		if err != nil {
			return err
		}
		if len(cr.Jobs) == 0 {
			return fmt.Errorf("claimed %d of %d parents, then nothing", done, parents)
		}
		var reps []wire.BatchReport
		for _, j := range cr.Jobs {
			reps = append(reps, wire.BatchReport{JobID: j.ID, Status: "done", ReportRequest: wire.ReportRequest{Lease: j.Lease, Result: result}})
		}
		if err := e.report(ctx, reps); err != nil {
			return err
		}
		done += len(cr.Jobs)
	}
	kids := make([]wire.SubmitRequest, children)
	for i := range kids {
		kids[i] = wire.SubmitRequest{Command: "true", Queue: cq, DependsOn: ids}
	}
	if _, err := e.submitBatch(ctx, tokenClient, kids); err != nil {
		return err
	}
	// The children become pending once the cluster sees every parent done.
	var cr *wire.ClaimResponse
	var r reply
	for range 100 {
		cr, r, err = e.claim(ctx, cq, children)
		res.Requests++
		res.Statuses[r.status]++
		if err != nil || len(cr.Jobs) > 0 {
			break
		}
		settle(ctx, 100*time.Millisecond)
	}
	res.Figures["parents"] = parents
	res.Figures["claim_reply_bytes"] = r.size
	res.Figures["claimed"] = len(cr.Jobs)
	if r.size > maxClaimReply {
		return fmt.Errorf("a claim of %d jobs answered %d MiB, over %d MiB", len(cr.Jobs), r.size>>20, maxClaimReply>>20)
	}
	if err != nil {
		if r.status >= 500 || r.status == 0 || r.status/100 == 2 {
			return fmt.Errorf("the claim failed: %w", err)
		}
		return nil // refused as a client error: bounded and clear
	}
	if len(cr.Jobs) == 0 {
		return errors.New("no child became claimable after every parent was done")
	}
	var reps []wire.BatchReport
	for _, j := range cr.Jobs {
		reps = append(reps, wire.BatchReport{JobID: j.ID, Status: "done", ReportRequest: wire.ReportRequest{Lease: j.Lease}})
	}
	return e.report(ctx, reps)
}

// maxWorkersPage is the most a page of 100 workers may weigh.
const maxWorkersPage = 1 << 20

// maxClaimReply is the most a claim reply may weigh in the parent_results
// attack: far below what the parents' results add up to.
const maxClaimReply = 32 << 20

func (e *env) registerWorkerQueues(ctx context.Context, qs ...string) error {
	_, err := e.call(ctx, http.MethodPost, "/workers/register", tokenWorker,
		wire.Worker{ID: workerID, Queues: append([]string{"canary", "hostile"}, qs...)}, nil)
	return err
}

func freezeQueue(ctx context.Context, e *env, res *Result) error {
	const q = "hostile-freeze"
	if err := e.registerWorkerQueues(ctx, q); err != nil {
		return err
	}
	// A keyless job rate-limited for 24h must not hold back the queue.
	if _, err := e.submitBatch(ctx, tokenClient, []wire.SubmitRequest{{Command: "true", Queue: q}}); err != nil {
		return err
	}
	cr, _, err := e.claim(ctx, q, 1)
	if err != nil || len(cr.Jobs) != 1 {
		return fmt.Errorf("claim the job to rate-limit: %d jobs, %v", len(cr.Jobs), err)
	}
	first := cr.Jobs[0]
	if err := e.report(ctx, []wire.BatchReport{{JobID: first.ID, Status: "failed",
		ReportRequest: wire.ReportRequest{Lease: first.Lease, Error: "429", RateLimitedFor: "24h"}}}); err != nil {
		return err
	}
	other, err := e.submitBatch(ctx, tokenOtherTenat, []wire.SubmitRequest{{Command: "true", Queue: q}})
	if err != nil {
		return err
	}
	var got *wire.Job
	for range 50 {
		cr, _, err := e.claim(ctx, q, 1)
		if err != nil {
			return err
		}
		if len(cr.Jobs) > 0 {
			got = &cr.Jobs[0]
			break
		}
		settle(ctx, 100*time.Millisecond)
	}
	res.Requests += 4
	if got == nil || got.ID != other[0] {
		return errors.New("after one keyless job was rate-limited for 24h, another tenant's job in its queue could not be claimed for 5s: the queue is frozen")
	}
	if err := e.report(ctx, []wire.BatchReport{{JobID: got.ID, Status: "done", ReportRequest: wire.ReportRequest{Lease: got.Lease}}}); err != nil {
		return err
	}
	// A job snoozed again and again must at last count an attempt.
	one := 1
	sn, err := e.submitBatch(ctx, tokenClient, []wire.SubmitRequest{{Command: "true", Queue: q, MaxAttempts: &one}})
	if err != nil {
		return err
	}
	const most = 200
	for i := range most {
		j, err := e.getJob(ctx, sn[0])
		if err != nil {
			return err
		}
		if j.Attempts > 0 || j.Status == wire.StatusFailed {
			res.Figures["snoozes_before_counted"] = i
			return nil
		}
		var cr *wire.ClaimResponse
		for range 100 {
			if cr, _, err = e.claim(ctx, q, 1); err != nil {
				return err
			}
			if len(cr.Jobs) > 0 {
				break
			}
			settle(ctx, 10*time.Millisecond)
		}
		if len(cr.Jobs) == 0 {
			return fmt.Errorf("the snoozed job could not be claimed again after %d snoozes", i)
		}
		res.Requests += 2
		if err := e.report(ctx, []wire.BatchReport{{JobID: cr.Jobs[0].ID, Status: "failed",
			ReportRequest: wire.ReportRequest{Lease: cr.Jobs[0].Lease, SnoozeFor: "1ms"}}}); err != nil {
			return err
		}
	}
	return fmt.Errorf("a job snoozed %d times still counts no attempt", most)
}

func workerIDs(ctx context.Context, e *env, res *Result) error {
	n := e.size(3000, 20000)
	qs := make([]string, 32)
	for i := range qs {
		qs[i] = fmt.Sprintf("wq%d", i)
	}
	rs := e.flood(ctx, res, n, e.cfg.Parallel, func(i int) reply {
		body, _ := json.Marshal(wire.Worker{ID: fmt.Sprintf("hostile-w%05d", i), Queues: qs, Tags: qs})
		return e.send(ctx, e.hc, http.MethodPost, e.cluster.Nodes[i%len(e.cluster.Nodes)].URL+"/workers/register", tokenWorker, nil, bytes.NewReader(body))
	})
	accepted := 0
	for _, r := range rs {
		if r.status/100 == 2 {
			accepted++
		}
	}
	res.Figures["ids_accepted"] = accepted
	// GET /workers honours its limit, and no reply is huge.
	r, err := e.call(ctx, http.MethodGet, "/workers?limit=100", tokenAdmin, nil, nil)
	if err != nil {
		return err
	}
	var wl wire.WorkerList
	if err := json.Unmarshal(r.body, &wl); err != nil && r.size <= maxWorkersPage {
		return fmt.Errorf("GET /workers?limit=100: %w", err)
	}
	res.Figures["workers_page_bytes"] = r.size
	if r.size > maxWorkersPage || len(wl.Workers) > 100 {
		return fmt.Errorf("GET /workers?limit=100 answered %d bytes, %d workers", r.size, len(wl.Workers))
	}
	all, err := e.call(ctx, http.MethodGet, "/workers", tokenAdmin, nil, nil)
	if err != nil {
		return err
	}
	res.Figures["workers_default_bytes"] = all.size
	if all.size > 8<<20 {
		return fmt.Errorf("GET /workers answered %d MiB", all.size>>20)
	}
	// A job read after the flood, timed for the report (not checked).
	ids, err := e.submitBatch(ctx, tokenClient, []wire.SubmitRequest{{Command: "true", Queue: "hostile"}})
	if err != nil {
		return err
	}
	start := time.Now()
	for range 20 {
		if _, err := e.getJob(ctx, ids[0]); err != nil {
			return err
		}
	}
	res.Figures["job_read_mean_ms"] = float64(time.Since(start).Microseconds()) / 20 / 1000
	return nil
}

func cascade(ctx context.Context, e *env, res *Result) error {
	const q = "hostile-cascade"
	// A tree, since one job may have at most 10,000 dependents: the root,
	// k jobs below it, and 10,000 below each of those.
	const fan = 10000
	k := e.size(2, 40)
	n := k + k*fan
	root, err := e.submitBatch(ctx, tokenClient, []wire.SubmitRequest{{Command: "true", Queue: q, Delay: "1h"}})
	if err != nil {
		return err
	}
	mid := make([]wire.SubmitRequest, k)
	for i := range mid {
		mid[i] = wire.SubmitRequest{Command: "true", Queue: q, DependsOn: root}
	}
	midIDs, err := e.submitBatch(ctx, tokenClient, mid)
	if err != nil {
		return fmt.Errorf("submit the first level: %w", err)
	}
	for _, id := range midIDs {
		kids := make([]wire.SubmitRequest, fan)
		for i := range kids {
			kids[i] = wire.SubmitRequest{Command: "true", Queue: q, DependsOn: []string{id}}
		}
		if _, err := e.submitBatch(ctx, tokenClient, kids); err != nil {
			return fmt.Errorf("submit the fan: %w", err)
		}
	}
	res.Figures["dependents"] = n
	start := time.Now()
	cr, err := e.call(ctx, http.MethodPost, "/jobs/"+root[0]+"/cancel", tokenClient, nil, nil)
	res.Requests++
	res.Statuses[cr.status]++
	res.Figures["cancel_ms"] = time.Since(start).Milliseconds()
	if err != nil && cr.status != http.StatusGatewayTimeout {
		return fmt.Errorf("cancel the root: %w", err)
	}
	// Another tenant's submits right after the cancel: each must be
	// accepted; their slowest is reported.
	var slowest time.Duration
	for i := range 20 {
		t0 := time.Now()
		if _, err := e.call(ctx, http.MethodPost, "/jobs", tokenOtherTenat,
			wire.SubmitRequest{Command: "true", Queue: "hostile", IdempotencyKey: fmt.Sprintf("during-cascade-%d", i)}, nil); err != nil {
			return fmt.Errorf("a submit during the cascade: %w", err)
		}
		slowest = max(slowest, time.Since(t0))
	}
	res.Figures["submit_during_max_ms"] = slowest.Milliseconds()
	j, err := e.getJob(ctx, root[0])
	if err != nil {
		return err
	}
	if j.Status != wire.StatusCancelled {
		return fmt.Errorf("the root shows %q after its cancel was answered, want cancelled", j.Status)
	}
	// Every dependent ends cancelled.
	for range 600 {
		left, err := e.countJobs(ctx, q, wire.StatusBlocked)
		if err != nil {
			return err
		}
		if left == 0 {
			res.Figures["cascade_done_ms"] = time.Since(start).Milliseconds()
			return nil
		}
		settle(ctx, 200*time.Millisecond)
	}
	return errors.New("dependents still blocked 2 minutes after the root was cancelled")
}

func idleConns(ctx context.Context, e *env, res *Result) error {
	n := e.size(3000, 22000)
	addr := strings.TrimPrefix(e.follower(ctx), "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	d := net.Dialer{Timeout: 2 * time.Second}
	refused := 0
	for i := range n {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			refused++
			continue
		}
		if i%2 == 1 { // half of them start a request and stall
			c.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n"))
		}
		conns = append(conns, c)
	}
	res.Requests = n
	res.Figures["dial_refused"] = refused
	// Hold them while the watcher probes every node.
	settle(ctx, e.cfgHold())
	// How many the node has closed by now.
	closed := 0
	buf := make([]byte, 1)
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(buf); err != nil && !isTimeout(err) {
			closed++
		}
	}
	res.Figures["closed_by_node"] = closed
	return nil
}

func (e *env) cfgHold() time.Duration {
	if e.cfg.Short {
		return 5 * time.Second
	}
	return 30 * time.Second
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
