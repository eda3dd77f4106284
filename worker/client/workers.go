package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/workron/workron/api/wire"
)

// claimSlack is added to a claim's long-poll wait to bound the request.
const claimSlack = 10 * time.Second

// Register announces a worker (POST /workers/register). Registering an id
// again refreshes its record.
func (c *Client) Register(ctx context.Context, w wire.Worker) error {
	if w.ID == "" {
		return fmt.Errorf("register worker: %w", ErrEmptyID)
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/workers/register", body: w}); err != nil {
		return fmt.Errorf("register worker %s: %w", w.ID, err)
	}
	return nil
}

// WorkerPage is a page of GET /workers.
type WorkerPage = Page

// WorkerList returns one page of the registered workers, in id order, with
// their status and running jobs (GET /workers); its NextCursor is "" after
// the last.
func (c *Client) WorkerList(ctx context.Context, page WorkerPage) (*wire.WorkerList, error) {
	var out wire.WorkerList
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/workers", query: page.query(), out: &out, idempotent: true}); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return &out, nil
}

// Workers lists every registered worker, in id order, with its status and
// running jobs: WorkerList's pages of 1000, followed to the last.
func (c *Client) Workers(ctx context.Context) ([]wire.Worker, error) {
	return followPages(ctx, func(ctx context.Context, p Page) ([]wire.Worker, string, error) {
		out, err := c.WorkerList(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return out.Workers, out.NextCursor, nil
	})
}

// DeleteWorker forgets a worker (DELETE /workers/{id}; the admin role):
// one the cluster counts as offline that holds no lease or gang
// reservation. An active or busy worker gives IsConflict, an unknown one
// IsNotFound (also what a retry of a delete that was applied gets).
func (c *Client) DeleteWorker(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("delete worker: %w", ErrEmptyID)
	}
	if _, err := c.do(ctx, call{method: http.MethodDelete, path: "/workers/" + url.PathEscape(id)}); err != nil {
		return fmt.Errorf("delete worker %s: %w", id, err)
	}
	return nil
}

// Next is the v0 worker API's claim (GET /jobs/next?worker_id=W): one job
// of queue (any when "") leased to workerID, waiting up to wait (0: the
// server's default), or nil when none came (204). Its heartbeats and
// reports may leave out the lease. Prefer Claim.
func (c *Client) Next(ctx context.Context, workerID, queue string, wait time.Duration) (*wire.Job, error) {
	if workerID == "" {
		return nil, fmt.Errorf("next job: %w", ErrEmptyID)
	}
	q := url.Values{"worker_id": {workerID}}
	if queue != "" {
		q.Set("queue", queue)
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var out *wire.Job
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/jobs/next", query: q, out: &out, longPoll: wait + claimSlack})
	if err != nil {
		return nil, fmt.Errorf("next job for worker %s: %w", workerID, err)
	}
	return out, nil
}

// Claim asks for up to req.Max jobs (POST /jobs/claim). The server may hold
// the request for up to req.Wait before answering with no jobs; the request
// is bounded by that wait plus 10s rather than by the HTTP client's Timeout.
// Every returned job is leased to req.WorkerID: its Lease field is the
// fencing token to send with heartbeats and reports. If the reply is lost
// (ctx ends, the connection breaks) jobs may have been leased anyway; their
// leases expire and the server retries them, at once if the request had a
// ClaimSeq and a later HeartbeatWorker covers it. A job's ParentResults
// are bounded in the reply: when it set ParentResultsTruncated,
// FetchParentResults reads the rest.
func (c *Client) Claim(ctx context.Context, req wire.ClaimRequest) (*wire.ClaimResponse, error) {
	if req.WorkerID == "" {
		return nil, fmt.Errorf("claim: %w", ErrEmptyID)
	}
	var wait time.Duration
	if req.Wait != "" {
		d, err := wire.ParseDuration("wait", req.Wait)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		wait = d
	}
	var out wire.ClaimResponse
	_, err := c.do(ctx, call{
		method: http.MethodPost, path: "/jobs/claim", body: req, out: &out,
		longPoll: wait + claimSlack,
	})
	if err != nil {
		return nil, fmt.Errorf("claim for worker %s: %w", req.WorkerID, err)
	}
	return &out, nil
}

// WorkerHeartbeat renews the leases of the jobs the worker runs (POST
// /workers/{id}/heartbeat) and returns what the worker must do, such as
// cancel a job, or stop one whose lease it did not renew (the reply's
// Lost). Leases the cluster holds for the worker but that are not in
// running are left to expire. A server that no longer knows the worker
// answers 404 (IsNotFound): register again.
func (c *Client) WorkerHeartbeat(ctx context.Context, workerID string, running []wire.JobLease) (*wire.WorkerHeartbeatResponse, error) {
	return c.HeartbeatWorker(ctx, workerID, wire.WorkerHeartbeatRequest{Jobs: running})
}

// HeartbeatWorker is WorkerHeartbeat with the whole request: with
// req.ClaimsFrom and req.ClaimsTo, the range of claim numbers
// (ClaimRequest.ClaimSeq) whose requests had ended when the worker listed
// req.Jobs, an attempt one of them claimed but req.Jobs does not list
// (its reply was lost) goes back to pending at once, without counting.
func (c *Client) HeartbeatWorker(ctx context.Context, workerID string, req wire.WorkerHeartbeatRequest) (*wire.WorkerHeartbeatResponse, error) {
	if workerID == "" {
		return nil, fmt.Errorf("worker heartbeat: %w", ErrEmptyID)
	}
	if req.Jobs == nil {
		req.Jobs = []wire.JobLease{}
	}
	var out wire.WorkerHeartbeatResponse
	path := "/workers/" + url.PathEscape(workerID) + "/heartbeat"
	body := req
	if _, err := c.do(ctx, call{method: http.MethodPost, path: path, body: body, out: &out}); err != nil {
		return nil, fmt.Errorf("heartbeat worker %s: %w", workerID, err)
	}
	return &out, nil
}

// WorkerActions waits up to req.Wait for what the worker must do with its
// attempts (POST /workers/{id}/actions): the cancels and preemptions of
// the attempts it holds other than req.Known, answered as soon as there is
// one, none when the wait ends first. It renews no lease. A server that
// does not know the worker answers 404 (IsNotFound); a release without the
// route answers 404 too, with no code (see the worker's use of it).
func (c *Client) WorkerActions(ctx context.Context, workerID string, req wire.WorkerActionsRequest) (*wire.WorkerActionsResponse, error) {
	if workerID == "" {
		return nil, fmt.Errorf("worker actions: %w", ErrEmptyID)
	}
	var wait time.Duration
	if req.Wait != "" {
		d, err := wire.ParseDuration("wait", req.Wait)
		if err != nil {
			return nil, fmt.Errorf("worker actions: %w", err)
		}
		wait = d
	}
	var out wire.WorkerActionsResponse
	path := "/workers/" + url.PathEscape(workerID) + "/actions"
	if _, err := c.do(ctx, call{method: http.MethodPost, path: path, body: req, out: &out, idempotent: true, longPoll: wait + claimSlack}); err != nil {
		return nil, fmt.Errorf("actions of worker %s: %w", workerID, err)
	}
	return &out, nil
}

// JobHeartbeat renews one job's lease (POST /jobs/{id}/heartbeat). A stale
// lease gives IsConflict; the reply's Action is "cancel" when the job was
// cancelled while running.
func (c *Client) JobHeartbeat(ctx context.Context, id string, lease uint64) (*wire.HeartbeatResponse, error) {
	return c.HeartbeatJob(ctx, id, wire.HeartbeatRequest{Lease: lease})
}

// HeartbeatJob is JobHeartbeat with the whole request: req.Progress, when
// set, is the attempt's progress, which the cluster keeps with the job
// (GET /jobs/{id} shows it). A bad progress (a percent outside 0–100, a
// message too long) gives ErrInvalid and renews nothing.
func (c *Client) HeartbeatJob(ctx context.Context, id string, req wire.HeartbeatRequest) (*wire.HeartbeatResponse, error) {
	if id == "" {
		return nil, fmt.Errorf("job heartbeat: %w", ErrEmptyID)
	}
	var out wire.HeartbeatResponse
	_, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, "heartbeat"), body: req, out: &out})
	if err != nil {
		return nil, fmt.Errorf("heartbeat job %s: %w", id, err)
	}
	return &out, nil
}

// Done reports that the attempt holding rep.Lease succeeded (POST
// /jobs/{id}/done) and returns the job. A lease that is no longer current
// gives IsConflict: the result was not recorded.
func (c *Client) Done(ctx context.Context, id string, rep wire.ReportRequest) (*wire.Job, error) {
	job, err := c.report(ctx, id, "done", rep)
	if err != nil {
		return nil, fmt.Errorf("report job %s done: %w", id, err)
	}
	return job, nil
}

// Fail reports that the attempt holding rep.Lease failed (POST
// /jobs/{id}/fail) and returns the job. The server retries the job per its
// policy unless rep.Retry points to false. Errors are as for Done.
func (c *Client) Fail(ctx context.Context, id string, rep wire.ReportRequest) (*wire.Job, error) {
	job, err := c.report(ctx, id, "fail", rep)
	if err != nil {
		return nil, fmt.Errorf("report job %s failed: %w", id, err)
	}
	return job, nil
}

// Reports ends several attempts in one request (POST /jobs/reports, at most
// wire.MaxBatchReports) and returns one result per report, in order. Each
// report stands alone: a result with Code "stale_lease" or "not_found"
// was not recorded while the others were. Resending is safe: a report is
// accepted once per lease, and a repeat of an accepted one answers as it
// did.
func (c *Client) Reports(ctx context.Context, reports []wire.BatchReport) ([]wire.BatchReportResult, error) {
	var out wire.BatchReportResponse
	_, err := c.do(ctx, call{
		method: http.MethodPost, path: "/jobs/reports",
		body: wire.BatchReportRequest{Reports: reports}, out: &out, idempotent: true,
	})
	if err != nil {
		return nil, fmt.Errorf("report %d attempts: %w", len(reports), err)
	}
	if len(out.Results) != len(reports) {
		return nil, fmt.Errorf("report %d attempts: the server answered %d results", len(reports), len(out.Results))
	}
	return out.Results, nil
}

func (c *Client) report(ctx context.Context, id, action string, rep wire.ReportRequest) (*wire.Job, error) {
	if id == "" {
		return nil, ErrEmptyID
	}
	var out wire.Job
	if _, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id, action), body: rep, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Checkpoint uploads a gang task's checkpoint (POST
// /jobs/{id}/checkpoint?epoch=N) while its gang drains: data replaces any
// older checkpoint of the task, and its next attempt gets it as
// CHECKPOINT_DATA. A stale epoch gives IsConflict; data over the server's
// cap (1 MiB) gives a 413 APIError. Resending is safe.
func (c *Client) Checkpoint(ctx context.Context, id string, epoch uint64, data []byte) error {
	if id == "" {
		return fmt.Errorf("checkpoint: %w", ErrEmptyID)
	}
	if data == nil {
		data = []byte{}
	}
	_, err := c.do(ctx, call{
		method: http.MethodPost, path: jobPath(id, "checkpoint"),
		query: url.Values{"epoch": {strconv.FormatUint(epoch, 10)}}, raw: data, idempotent: true,
	})
	if err != nil {
		return fmt.Errorf("checkpoint job %s: %w", id, err)
	}
	return nil
}

// Preempted acknowledges that the worker stopped a gang task for the drain
// of epoch (POST /jobs/{id}/preempted?epoch=N) and returns the job. A stale
// epoch (the drain ended without this worker, or the acknowledgement was
// already applied) gives IsConflict.
func (c *Client) Preempted(ctx context.Context, id string, epoch uint64) (*wire.Job, error) {
	if id == "" {
		return nil, fmt.Errorf("acknowledge preemption: %w", ErrEmptyID)
	}
	var out wire.Job
	_, err := c.do(ctx, call{
		method: http.MethodPost, path: jobPath(id, "preempted"),
		query: url.Values{"epoch": {strconv.FormatUint(epoch, 10)}}, out: &out,
	})
	if err != nil {
		return nil, fmt.Errorf("acknowledge preemption of job %s: %w", id, err)
	}
	return &out, nil
}
