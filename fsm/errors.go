package fsm

import (
	"errors"
	"fmt"
)

// Rejections. A command that breaks a rule changes nothing and returns one of
// these in its Result; callers test them with errors.Is. Their text, and
// that of the errors wrapping them here, is written for users: the API sends
// it as it is (package api, reply), so it carries no package prefix.
var (
	// ErrNotFound means the job does not exist (or was deleted).
	ErrNotFound = errors.New("job not found")
	// ErrWorkerNotFound means the worker never registered.
	ErrWorkerNotFound = errors.New("worker not found")
	// ErrStaleLease means the report or heartbeat names an attempt that is no
	// longer the job's current one: its lease expired and the job moved on.
	ErrStaleLease = errors.New("stale lease")
	// ErrNotRunning means the job holds no lease to report on.
	ErrNotRunning = errors.New("job is not running")
	// ErrConflict means the job's state does not allow the operation.
	ErrConflict = errors.New("conflicting state")
	// ErrScheduleNotFound means the schedule does not exist.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrGangNotFound means the gang does not exist (or was deleted).
	ErrGangNotFound = errors.New("gang not found")
	// ErrStaleEpoch means the command names a reservation or drain of a
	// gang that is no longer the current one: the gang moved on.
	ErrStaleEpoch = errors.New("stale epoch")
	// ErrForbidden means the caller's token is not the one that claimed
	// the attempt, or that registered the worker id while it is active.
	ErrForbidden = errors.New("forbidden")
	// ErrLeaseRequired means the report or heartbeat gave no lease for an
	// attempt whose claim handed its worker one.
	ErrLeaseRequired = errors.New("lease required")
)

// ValidationError says which field of a command is invalid and why.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

// StateError is a conflict with the job's current status; it matches
// ErrConflict with errors.Is.
type StateError struct {
	JobID  string
	Status string
	Op     string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("cannot %s job %s: it is %s", e.Op, e.JobID, e.Status)
}

// Is makes a StateError match ErrConflict.
func (e *StateError) Is(target error) bool { return target == ErrConflict }

// VersionError means a log entry was written by a newer Workron that speaks
// an encoding this node does not know.
type VersionError struct{ Got byte }

func (e *VersionError) Error() string {
	return fmt.Sprintf("log entry encoding version %d is newer than this node's %d: upgrade this node's binary", e.Got, EncodingVersion)
}

// StateWriteError is a batch of committed entries the state file could
// not take (a full or failing disk): nothing of the batch was written, and
// the node must stop (see FSM.OnFatal). Started again, it applies the log
// from Applied on.
type StateWriteError struct {
	Applied uint64 // the state file's applied index, kept
	Index   uint64 // the last entry of the batch that failed
	Path    string // the state file
	Err     error
}

func (e *StateWriteError) Error() string {
	return fmt.Sprintf("workron: stopping: the state file %s could not be written (log entries %d..%d): %v",
		e.Path, e.Applied+1, e.Index, e.Err)
}

func (e *StateWriteError) Unwrap() error { return e.Err }
