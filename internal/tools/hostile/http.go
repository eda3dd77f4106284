package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/workron/workron/api/wire"
)

// workerID is the one worker id the suite's own claims use.
const workerID = "hostile-worker"

// maxKeptReply is how much of a reply the suite reads into memory; the rest
// is counted and discarded, so a huge reply costs the suite nothing.
const maxKeptReply = 8 << 20

// reply is one exchange's outcome.
type reply struct {
	status int    // 0: no reply
	body   []byte // at most maxKeptReply bytes
	size   int64  // the whole body's length
	err    error
}

// send makes one request with token as the bearer, reading at most
// maxKeptReply bytes of the reply and counting the rest.
func (e *env) send(ctx context.Context, hc *http.Client, method, url, token string, header http.Header, body io.Reader) reply {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return reply{err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" && body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	var kept bytes.Buffer
	n, err := io.Copy(&kept, io.LimitReader(resp.Body, maxKeptReply))
	rest, err2 := io.Copy(io.Discard, resp.Body)
	if err == nil {
		err = err2
	}
	return reply{status: resp.StatusCode, body: kept.Bytes(), size: n + rest, err: err}
}

// call sends a JSON body (nil: none) to the first node that answers other
// than with 503 no_leader and decodes a 2xx reply into out.
func (e *env) call(ctx context.Context, method, path, token string, in, out any) (reply, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return reply{}, err
		}
	}
	var r reply
	for _, n := range e.cluster.Nodes {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		r = e.send(ctx, e.probe, method, n.URL+path, token, nil, rd)
		if r.err == nil && r.status != http.StatusServiceUnavailable {
			break
		}
	}
	switch {
	case r.err != nil:
		return r, fmt.Errorf("%s %s: %w", method, path, r.err)
	case r.status/100 != 2:
		return r, fmt.Errorf("%s %s: %d %s", method, path, r.status, bytes.TrimSpace(r.body))
	case out != nil:
		if err := json.Unmarshal(r.body, out); err != nil {
			return r, fmt.Errorf("%s %s: decode the reply (%d bytes): %w", method, path, r.size, err)
		}
	}
	return r, nil
}

// flood sends n requests, parallel at a time, each made by mk, and counts
// the statuses into res.
func (e *env) flood(ctx context.Context, res *Result, n, parallel int, mk func(i int) reply) []reply {
	out := make([]reply, n)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = mk(i)
		})
	}
	wg.Wait()
	for _, r := range out {
		res.Requests++
		res.Statuses[r.status]++
	}
	return out
}

// follower is a node that does not lead now (the first node if none).
func (e *env) follower(ctx context.Context) string {
	l, _, err := e.cluster.Leader(ctx)
	for _, n := range e.cluster.Nodes {
		if err != nil || n != l {
			return n.URL
		}
	}
	return e.cluster.Nodes[0].URL
}

func (e *env) registerWorker(ctx context.Context, id string) error {
	_, err := e.call(ctx, http.MethodPost, "/workers/register", tokenWorker,
		wire.Worker{ID: id, Queues: []string{"canary", "hostile"}}, nil)
	if err != nil {
		return fmt.Errorf("hostile: register %s: %w", id, err)
	}
	return nil
}

// submitBatch submits jobs through POST /jobs/batch in batches of at most
// 1,000 and returns their ids.
func (e *env) submitBatch(ctx context.Context, token string, jobs []wire.SubmitRequest) ([]string, error) {
	var ids []string
	for len(jobs) > 0 {
		k := min(len(jobs), 1000)
		var got wire.JobList
		if _, err := e.call(ctx, http.MethodPost, "/jobs/batch", token, wire.BatchSubmitRequest{Jobs: jobs[:k]}, &got); err != nil {
			return ids, err
		}
		for _, j := range got.Jobs {
			ids = append(ids, j.ID)
		}
		jobs = jobs[k:]
	}
	return ids, nil
}

// claim claims up to max jobs of queue as the suite's worker (no wait).
func (e *env) claim(ctx context.Context, queue string, max int) (*wire.ClaimResponse, reply, error) {
	var cr wire.ClaimResponse
	r, err := e.call(ctx, http.MethodPost, "/jobs/claim", tokenWorker,
		wire.ClaimRequest{WorkerID: workerID, Queues: []string{queue}, Max: max, Shell: true}, &cr)
	return &cr, r, err
}

// report ends attempts through POST /jobs/reports.
func (e *env) report(ctx context.Context, reports []wire.BatchReport) error {
	for len(reports) > 0 {
		k := min(len(reports), wire.MaxBatchReports)
		var br wire.BatchReportResponse
		if _, err := e.call(ctx, http.MethodPost, "/jobs/reports", tokenWorker, wire.BatchReportRequest{Reports: reports[:k]}, &br); err != nil {
			return err
		}
		for _, x := range br.Results {
			if x.Error != "" {
				return fmt.Errorf("report %s: %s (%s)", x.JobID, x.Error, x.Code)
			}
		}
		reports = reports[k:]
	}
	return nil
}

// getJob reads one job.
func (e *env) getJob(ctx context.Context, id string) (*wire.Job, error) {
	var j wire.Job
	if _, err := e.call(ctx, http.MethodGet, "/jobs/"+id, tokenAdmin, nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}
