package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// Progress and results (see the package doc).

// ProgressLinePrefix starts a line of a shell job's output that reports
// its progress: "::workron-progress PERCENT [MESSAGE]", PERCENT a whole
// number from 0 to 100 (held to those bounds) and MESSAGE the rest of the
// line (cut to wire.MaxProgressMessage bytes). The line stays in the output.
const ProgressLinePrefix = "::workron-progress "

// ResultFileEnv names the variable that gives a shell job the path of the
// file it may write its result into: JSON, at most wire.MaxResultBytes.
const ResultFileEnv = "WORKRON_RESULT_FILE"

// Errors of results.
var (
	// ErrResultTooLarge is returned by Job.SetResult for a value whose
	// JSON is over wire.MaxResultBytes.
	ErrResultTooLarge = fmt.Errorf("worker: a result is at most %d bytes of JSON", wire.MaxResultBytes)
	// ErrNoParentResult is returned by Job.ParentResult for a job that is
	// not a parent of this one or returned no result.
	ErrNoParentResult = errors.New("worker: no result of that parent")
)

// progressOffFor is how long a worker sends no progress after the cluster
// refused it for a member that does not run protocol 3 yet.
const progressOffFor = time.Minute

// progressSlot holds a running attempt's latest progress until a heartbeat
// has carried it: updates made between two heartbeats cost one, and only
// the latest is sent.
type progressSlot struct {
	notify chan struct{} // signalled at each update (cap 1); nil: none
	mu     sync.Mutex
	latest wire.ProgressUpdate
	seq    uint64 // updates made
	sent   uint64 // the update the last answered heartbeat carried
}

// set records an update, held to the bounds the cluster takes.
func (p *progressSlot) set(percent int, msg string) {
	if len(msg) > wire.MaxProgressMessage {
		msg = msg[:wire.MaxProgressMessage]
		for len(msg) > 0 && !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest = wire.ProgressUpdate{Percent: min(max(percent, 0), 100), Message: msg}
	p.seq++
	if p.notify != nil {
		signal(p.notify)
	}
}

// pending returns the latest update if no heartbeat has carried it yet,
// and its number.
func (p *progressSlot) pending() (*wire.ProgressUpdate, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seq == p.sent {
		return nil, 0
	}
	u := p.latest
	return &u, p.seq
}

// delivered marks update seq (and those before it) as carried.
func (p *progressSlot) delivered(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = max(p.sent, seq)
}

// Progress records how far the job is: percent from 0 to 100 (held to
// those bounds) and a short message (cut to wire.MaxProgressMessage bytes).
// It does not block: the worker sends the latest update at once, or, when
// it sent progress less than Config.ProgressInterval ago, once that has
// passed (with its heartbeat if that comes first), so calling it often
// costs nothing more. It is safe for concurrent use, and does nothing on
// a Job not given by a Worker.
func (j *Job) Progress(percent int, message string) {
	if j.progress != nil {
		j.progress.set(percent, message)
	}
}

// SetResult makes v, as JSON, the job's result, reported with its end and
// kept with the job (GET /jobs/{id}), where its dependents read it. Of
// several calls the last wins. It returns ErrResultTooLarge for JSON over
// wire.MaxResultBytes, and json.Marshal's error for a value it cannot encode;
// the result is then unchanged. Call it from the handler before it returns.
func (j *Job) SetResult(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("worker: result: %w", err)
	}
	if len(b) > wire.MaxResultBytes {
		return fmt.Errorf("%w (got %d)", ErrResultTooLarge, len(b))
	}
	j.result = b
	return nil
}

// ParentResult decodes the result of parent id, one of the jobs this one
// depends on, into v. It returns ErrNoParentResult when that job returned
// none (or is not a parent).
func (j *Job) ParentResult(id string, v any) error {
	r, ok := j.ParentResults[id]
	if !ok || wire.IsNullResult(r) {
		return fmt.Errorf("%w: %s", ErrNoParentResult, id)
	}
	if err := json.Unmarshal(r, v); err != nil {
		return fmt.Errorf("worker: result of parent %s: %w", id, err)
	}
	return nil
}

// taskKey is the context key of the task a job's context belongs to.
type taskKey struct{}

// withTask returns ctx carrying t, for the job's runner to find its
// progress slot.
func withTask(ctx context.Context, t *task) context.Context {
	return context.WithValue(ctx, taskKey{}, t)
}

// progressOf is the progress slot of the task ctx belongs to, or nil.
func progressOf(ctx context.Context) *progressSlot {
	if t, ok := ctx.Value(taskKey{}).(*task); ok {
		return &t.progress
	}
	return nil
}

// sendHeartbeat sends req with the progress of its running attempts that
// no heartbeat has carried yet. When the cluster refuses progress (a member
// still runs protocol 2, during a rolling upgrade) it sends req again
// without it, and sends none for a while.
func (w *Worker) sendHeartbeat(ctx context.Context, req wire.WorkerHeartbeatRequest) (*wire.WorkerHeartbeatResponse, error) {
	delivered := w.attachProgress(req.Jobs)
	resp, err := w.client.HeartbeatWorker(ctx, w.cfg.ID, req)
	if err != nil && delivered != nil && client.CodeOf(err) == wire.CodeUpgradeInProgress {
		w.log.Warn("the cluster does not take progress yet (a member runs an older release): progress not sent")
		w.progressOff.Store(time.Now().Add(progressOffFor).UnixNano())
		for i := range req.Jobs {
			req.Jobs[i].Progress = nil
		}
		return w.client.HeartbeatWorker(ctx, w.cfg.ID, req)
	}
	if err == nil && delivered != nil {
		delivered()
	}
	return resp, err
}

// attachProgress sets the progress of each of leases whose running
// attempt has an update no heartbeat has carried, and returns a function
// that marks those updates delivered (nil when there are none).
func (w *Worker) attachProgress(leases []wire.JobLease) func() {
	if time.Now().UnixNano() < w.progressOff.Load() {
		return nil
	}
	type sent struct {
		slot *progressSlot
		seq  uint64
	}
	var carried []sent
	w.mu.Lock()
	for i := range leases {
		t := w.running[leases[i].JobID]
		if t == nil || t.job.Lease != leases[i].Lease {
			continue
		}
		if u, seq := t.progress.pending(); u != nil {
			leases[i].Progress = u
			carried = append(carried, sent{&t.progress, seq})
		}
	}
	w.mu.Unlock()
	if len(carried) == 0 {
		return nil
	}
	return func() {
		for _, c := range carried {
			c.slot.delivered(c.seq)
		}
	}
}

// withNewProgress keeps the leases whose running attempt has an update
// no heartbeat has carried, in place.
func (w *Worker) withNewProgress(leases []wire.JobLease) []wire.JobLease {
	out := leases[:0]
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range leases {
		if t := w.running[l.JobID]; t != nil && t.job.Lease == l.Lease {
			if u, _ := t.progress.pending(); u != nil {
				out = append(out, l)
			}
		}
	}
	return out
}

// progressWriter passes a shell job's output on to next, and records each
// progress line (ProgressLinePrefix) in slot.
type progressWriter struct {
	next io.Writer
	slot *progressSlot
	line []byte // the current line so far, while it may be a progress line
	long bool   // the current line is longer than any progress line
}

// maxProgressLine is the longest progress line read.
var maxProgressLine = len(ProgressLinePrefix) + len("100 ") + wire.MaxProgressMessage + 1

// progressOutput wraps next to watch for the progress lines of the job ctx
// belongs to.
func progressOutput(ctx context.Context, next io.Writer) io.Writer {
	slot := progressOf(ctx)
	if slot == nil {
		return next
	}
	return &progressWriter{next: next, slot: slot}
}

func (pw *progressWriter) Write(p []byte) (int, error) {
	n, err := pw.next.Write(p)
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if !pw.long {
			if len(pw.line)+len(chunk) > maxProgressLine {
				pw.long, pw.line = true, pw.line[:0]
			} else {
				pw.line = append(pw.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !pw.long {
			pw.parse(pw.line)
		}
		pw.line, pw.long = pw.line[:0], false
		rest = rest[i+1:]
	}
	return n, err
}

// parse records line if it is a progress line.
func (pw *progressWriter) parse(line []byte) {
	s, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\r"), ProgressLinePrefix)
	if !ok {
		return
	}
	num, msg, _ := strings.Cut(strings.TrimLeft(s, " "), " ")
	pct, err := strconv.Atoi(strings.TrimSuffix(num, "%"))
	if err != nil {
		return
	}
	pw.slot.set(pct, strings.TrimSpace(msg))
}

// jobFiles are a shell job's result file and, when its parents' results do
// not fit a variable, the file that holds them, in a directory of their
// own that the worker removes after the job.
type jobFiles struct {
	dir, result string
}

// prepareFiles gives cmd (a shell job's process, not yet started) its
// result file (ResultFileEnv) and its parents' results
// (wire.ParentResultsEnv, or the file wire.ParentResultsFileEnv names).
func (w *Worker) prepareFiles(cmd *exec.Cmd, job wire.Job) (*jobFiles, error) {
	dir, err := os.MkdirTemp("", "workron-job-")
	if err != nil {
		return nil, fmt.Errorf("result file: %w", err)
	}
	f := &jobFiles{dir: dir, result: filepath.Join(dir, "result.json")}
	if err := w.handOver(&checkpoint{dir: dir, path: f.result}); err != nil {
		f.remove()
		return nil, fmt.Errorf("result file: %w", err)
	}
	cmd.Env = append(cmd.Env, ResultFileEnv+"="+f.result)
	if len(job.ParentResults) == 0 {
		return f, nil
	}
	all, err := json.Marshal(job.ParentResults)
	if err != nil {
		f.remove()
		return nil, fmt.Errorf("parent results: %w", err)
	}
	if len(all) <= wire.MaxResultBytes {
		cmd.Env = append(cmd.Env, wire.ParentResultsEnv+"="+string(all))
		return f, nil
	}
	path := filepath.Join(dir, "parent-results.json")
	if err := os.WriteFile(path, all, 0o644); err != nil {
		f.remove()
		return nil, fmt.Errorf("parent results: %w", err)
	}
	cmd.Env = append(cmd.Env, wire.ParentResultsFileEnv+"="+path)
	return f, nil
}

// withResult adds the result the job wrote to out, a successful run's
// outcome: none when the file is empty; a failure when it is not JSON or
// too large.
func (f *jobFiles) withResult(out outcome) outcome {
	if out.err != nil {
		return out
	}
	data, err := readRegular(f.result, wire.MaxResultBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return out
	case errors.Is(err, errTooLarge):
		out.err = fmt.Errorf("%s: %w", ResultFileEnv, ErrResultTooLarge)
		return out
	case err != nil:
		out.err = fmt.Errorf("%s: %w", ResultFileEnv, err)
		return out
	}
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
	case !json.Valid(data):
		out.err = fmt.Errorf("%s: the job wrote a result that is not JSON", ResultFileEnv)
	default:
		out.result = data
	}
	return out
}

// remove deletes the files; safe on nil.
func (f *jobFiles) remove() {
	if f != nil {
		_ = os.RemoveAll(f.dir)
	}
}
