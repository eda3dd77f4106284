package store

import "fmt"

var (
	bucketGangs       = []byte("gangs")       // id -> Gang
	bucketCheckpoints = []byte("checkpoints") // job id -> epoch(8) data
)

// GangStatus is a gang's state as a whole.
type GangStatus string

// The gang statuses.
const (
	GangBlocked   GangStatus = "blocked"   // waiting to be placed; its tasks are blocked
	GangReserved  GangStatus = "reserved"  // placed: its tasks wait for their workers to claim them
	GangRunning   GangStatus = "running"   // every task was claimed
	GangDraining  GangStatus = "draining"  // a task failed: the others are being stopped
	GangDone      GangStatus = "done"      // every task is done
	GangFailed    GangStatus = "failed"    // a task failed with no attempts left
	GangCancelled GangStatus = "cancelled" // cancelled by a user
)

// Finished reports whether the gang will not run again (unless retried).
func (s GangStatus) Finished() bool {
	return s == GangDone || s == GangFailed || s == GangCancelled
}

// Gang is the stored record of a gang: N tasks (jobs) that run together, one
// per worker, or not at all. Times are Unix nanoseconds.
type Gang struct {
	ID        string     `json:"id"`
	Seq       uint64     `json:"seq"` // the first task's Seq: orders gangs by age
	Size      int        `json:"size"`
	Tasks     []string   `json:"tasks"` // job ids by gang index
	Status    GangStatus `json:"st"`
	Queue     string     `json:"q"`
	Type      string     `json:"type,omitempty"`
	Priority  int        `json:"prio,omitempty"`
	Resources Resources  `json:"res,omitzero"` // what each task needs
	Tags      []string   `json:"tags,omitempty"`
	// Epoch counts the gang's reservations and drains. Commands about a
	// reservation or a drain name its epoch, so one that comes late (a
	// stale acknowledgement, a timeout decided before the gang moved on)
	// changes nothing.
	Epoch      uint64   `json:"epoch,omitempty"`
	Workers    []string `json:"workers,omitempty"`  // the worker of each task while reserved or running
	RunAt      int64    `json:"run_at,omitempty"`   // not placed before this time (backoff)
	ReservedAt int64    `json:"reserved,omitempty"` // when the current reservation was made
	DrainAt    int64    `json:"drain,omitempty"`    // when the current drain began
	Failing    string   `json:"failing,omitempty"`  // the task whose end began the drain
	Final      bool     `json:"final,omitempty"`    // the gang fails when the drain ends
	LastError  string   `json:"err,omitempty"`
	CreatedAt  int64    `json:"created"`
	DoneAt     int64    `json:"done,omitempty"`

	ModifyIndex uint64 `json:"mod"`
}

// Gang returns the gang with the given id, or ErrNotFound.
func (t *Tx) Gang(id string) (*Gang, error) {
	v := t.tx.Bucket(bucketGangs).Get([]byte(id))
	if v == nil {
		return nil, ErrNotFound
	}
	g := new(Gang)
	if err := decodeJSON(v, g); err != nil {
		return nil, fmt.Errorf("gang %s: %w", id, err)
	}
	return g, nil
}

// PutGang stores (creates or replaces) a gang.
func (t *Tx) PutGang(g *Gang, index uint64) error {
	g.ModifyIndex = index
	v, err := encodeJSON(g)
	if err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketGangs).Put([]byte(g.ID), v); err != nil {
		return fmt.Errorf("put gang %s: %w", g.ID, err)
	}
	return nil
}

// DeleteGang removes a gang record; its jobs are the caller's.
func (t *Tx) DeleteGang(id string) error {
	if err := t.tx.Bucket(bucketGangs).Delete([]byte(id)); err != nil {
		return fmt.Errorf("delete gang %s: %w", id, err)
	}
	return nil
}

// ForEachGang calls fn for each gang in id order. fn must not modify the
// store.
func (t *Tx) ForEachGang(fn func(*Gang) error) error {
	return t.tx.Bucket(bucketGangs).ForEach(func(k, v []byte) error {
		g := new(Gang)
		if err := decodeJSON(v, g); err != nil {
			return fmt.Errorf("gang %s: %w", k, err)
		}
		return fn(g)
	})
}

// Checkpoint returns the latest checkpoint of a job and the drain epoch it
// was taken in, or ErrNotFound.
func (t *Tx) Checkpoint(jobID string) (data []byte, epoch uint64, err error) {
	v := t.tx.Bucket(bucketCheckpoints).Get([]byte(jobID))
	if len(v) < 8 {
		return nil, 0, ErrNotFound
	}
	return append([]byte(nil), v[8:]...), getUint(v[:8]), nil
}

// PutCheckpoint replaces a job's checkpoint.
func (t *Tx) PutCheckpoint(jobID string, epoch uint64, data []byte) error {
	v := append(putUint(epoch), data...)
	if err := t.tx.Bucket(bucketCheckpoints).Put([]byte(jobID), v); err != nil {
		return fmt.Errorf("put checkpoint of job %s: %w", jobID, err)
	}
	return nil
}

// DeleteCheckpoint drops a job's checkpoint, if it has one.
func (t *Tx) DeleteCheckpoint(jobID string) error {
	if err := t.tx.Bucket(bucketCheckpoints).Delete([]byte(jobID)); err != nil {
		return fmt.Errorf("delete checkpoint of job %s: %w", jobID, err)
	}
	return nil
}
