package worker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// Checkpoint limits.
const (
	// maxCheckpointBytes is the server's cap on one checkpoint; a larger
	// file is not uploaded.
	maxCheckpointBytes = 1 << 20
	// maxEnvCheckpoint is the longest CHECKPOINT_DATA passed on in a
	// command's environment; Linux refuses to exec with a single variable
	// much over 128 KiB. A longer one reaches the command only through the
	// $WORKRON_CHECKPOINT file.
	maxEnvCheckpoint = 64 << 10
)

// preemptError stops a gang task for the drain of its gang's epoch. It
// matches errPreempted, and its text is what errPreempted says.
type preemptError struct{ epoch uint64 }

func (e *preemptError) Error() string        { return errPreempted.Error() }
func (e *preemptError) Is(target error) bool { return target == errPreempted }

// preemption is the cause that stops a job preempted at epoch.
func preemption(epoch uint64) error {
	if epoch == 0 {
		return errPreempted
	}
	return &preemptError{epoch: epoch}
}

// checkpoint is the file a gang task may leave its state in.
type checkpoint struct {
	dir, path string
}

// withCheckpoint gives a gang task a checkpoint file: its path is in the
// job's env as WORKRON_CHECKPOINT, and it starts with the checkpoint the
// task's previous attempt left (CHECKPOINT_DATA), if any. Other jobs are
// returned as they are, with a nil checkpoint.
func (w *Worker) withCheckpoint(log *slog.Logger, job wire.Job) (wire.Job, *checkpoint) {
	if job.GangID == "" {
		return job, nil
	}
	dir, err := os.MkdirTemp("", "workron-checkpoint-")
	if err != nil {
		log.Warn("no checkpoint file for this gang task", "err", err)
		return job, nil
	}
	ck := &checkpoint{dir: dir, path: filepath.Join(dir, "checkpoint")}
	env := maps.Clone(job.Env)
	if env == nil {
		env = make(map[string]string)
	}
	env["WORKRON_CHECKPOINT"] = ck.path
	if data := env["CHECKPOINT_DATA"]; data != "" {
		if b, err := base64.StdEncoding.DecodeString(data); err != nil {
			log.Warn("CHECKPOINT_DATA is not base64; not restored to the file", "err", err)
		} else if err := os.WriteFile(ck.path, b, 0o600); err != nil {
			log.Warn("restore checkpoint file", "err", err)
		}
		if len(data) > maxEnvCheckpoint {
			delete(env, "CHECKPOINT_DATA")
		}
	}
	if err := w.handOver(ck); err != nil {
		log.Warn("the checkpoint file stays the worker's", "err", err)
	}
	job.Env = env
	return job, ck
}

// read returns the checkpoint the task left, or nil when there is none (or
// it is too large to upload).
func (ck *checkpoint) read(log *slog.Logger) []byte {
	if ck == nil {
		return nil
	}
	data, err := readRegular(ck.path, maxCheckpointBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case errors.Is(err, errTooLarge):
		log.Warn("checkpoint not uploaded: larger than the server keeps", "max", maxCheckpointBytes)
		return nil
	case err != nil:
		log.Warn("read checkpoint file", "err", err)
		return nil
	}
	return data
}

// errTooLarge is readRegular's answer for a file over its limit.
var errTooLarge = errors.New("file too large")

// readRegular reads the regular file at path, up to limit bytes. It does not
// follow a symbolic link there and does not block on a FIFO: the command that
// left the file may have made it either.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// remove deletes the checkpoint file; safe on nil.
func (ck *checkpoint) remove() {
	if ck != nil {
		_ = os.RemoveAll(ck.dir)
	}
}

// settle tells the server how an attempt ended: a preempted gang task's
// checkpoint and acknowledgement, a parked or superseded attempt nothing,
// anything else a report.
func (w *Worker) settle(ctx context.Context, log *slog.Logger, job wire.Job, out outcome, ck *checkpoint) {
	if out.parked {
		return // the cluster ended the attempt, or leased the job again
	}
	pe := preemptOf(out.err)
	if pe == nil {
		w.queueReport(log, job, out)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.currentLeaseTTL())
	defer cancel()
	if data := ck.read(log); len(data) > 0 {
		w.retry(ctx, log, "checkpoint", func(ctx context.Context) error {
			return w.client.Checkpoint(ctx, job.ID, pe.epoch, data)
		})
	}
	if w.retry(ctx, log, "preempted", func(ctx context.Context) error {
		_, err := w.client.Preempted(ctx, job.ID, pe.epoch)
		return err
	}) {
		log.Info("preemption acknowledged", "epoch", pe.epoch)
	}
}

// preemptOf is err's *preemptError, or nil; it costs nothing when err is
// nil (an attempt that succeeded).
func preemptOf(err error) *preemptError {
	if err == nil {
		return nil
	}
	var pe *preemptError
	if !errors.As(err, &pe) {
		return nil
	}
	return pe
}

// retry calls send until it succeeds, the server refuses for good, or ctx
// ends, backing off after transient failures, and reports whether it
// succeeded. A 409 (stale epoch) or 404 means the server moved on.
func (w *Worker) retry(ctx context.Context, log *slog.Logger, what string, send func(context.Context) error) bool {
	bo := newBackoff(100*time.Millisecond, 2*time.Second)
	for {
		err := send(ctx)
		switch {
		case err == nil:
			return true
		case client.IsConflict(err) || client.IsNotFound(err):
			log.Warn(what+" dropped: the server moved on", "err", err)
			return false
		case !transient(err):
			log.Error(what+" refused", "err", err)
			return false
		}
		log.Warn(what+" failed, retrying", "err", err)
		if !sleep(ctx, bo.next()) {
			log.Error(what+" abandoned after one lease TTL", "err", err)
			return false
		}
	}
}
