package worker

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// report sends out to /done or /fail, retrying transient failures with
// backoff for up to one lease TTL. A 409 (stale lease) or 404 drops it: the
// server has given the job to someone else or forgotten it.
func (w *Worker) report(ctx context.Context, log *slog.Logger, job wire.Job, out outcome) {
	ctx, cancel := context.WithTimeout(ctx, w.currentLeaseTTL())
	defer cancel()
	req := wire.ReportRequest{Lease: job.Lease, ExitCode: out.exitCode, Output: out.output}
	send, verb := w.client.Done, "done"
	if out.err != nil {
		req.Error, req.Retry = out.err.Error(), out.retry
		send, verb = w.client.Fail, "fail"
	}
	bo := newBackoff(100*time.Millisecond, 2*time.Second)
	for {
		_, err := send(ctx, job.ID, req)
		switch {
		case err == nil:
			log.Debug("reported", "report", verb)
			return
		case client.IsConflict(err) || client.IsNotFound(err):
			log.Warn("report dropped: the lease is no longer current", "report", verb, "err", err)
			return
		case !transient(err):
			log.Error("report refused", "report", verb, "err", err)
			return
		}
		log.Warn("report failed, retrying", "report", verb, "err", err)
		if !sleep(ctx, bo.next()) {
			log.Error("report abandoned after one lease TTL", "report", verb, "err", err)
			return
		}
	}
}

// transient reports whether err may go away by itself: a transport error or
// a 5xx or 429 reply.
func transient(err error) bool {
	s := client.StatusOf(err)
	return s == 0 || s >= 500 || s == http.StatusTooManyRequests
}
