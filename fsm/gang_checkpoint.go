package fsm

// Checkpoints: what a gang task leaves while its gang drains, kept for its
// next attempt (see taskClaimed) and deleted when the gang finishes.

import (
	"errors"
	"fmt"

	"github.com/workron/workron/store"
)

// checkpoint keeps a draining task's checkpoint, replacing an older one.
func (a *applier) checkpoint(c *Checkpoint) Result {
	if len(c.Data) > MaxCheckpointBytes {
		return Result{Err: &ValidationError{Field: "checkpoint", Reason: fmt.Sprintf("larger than %d bytes", MaxCheckpointBytes)}}
	}
	j, g, err := a.drainingTask(c.JobID, c.Epoch, c.Token, "checkpoint")
	if err != nil {
		return Result{Err: err}
	}
	a.must(a.tx.PutCheckpoint(j.ID, c.Epoch, c.Data))
	return Result{Jobs: []*store.Job{j}, Gang: g}
}

// Checkpoint returns a job's latest checkpoint and the epoch it was taken
// in, or an error matching ErrNotFound when it has none.
func (f *FSM) Checkpoint(jobID string) ([]byte, uint64, error) {
	var (
		data  []byte
		epoch uint64
	)
	err := f.view(func(tx *store.Tx) error {
		var err error
		data, epoch, err = tx.Checkpoint(jobID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, fmt.Errorf("checkpoint of job %s: %w", jobID, ErrNotFound)
	}
	return data, epoch, err
}
