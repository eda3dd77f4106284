// Package liveness says which workers this node counts as alive: when it
// last heard from each (the stored last heartbeat, or a later long-poll or
// heartbeat seen here), and how long a silent worker stays alive
// (OfflineAfter). The API marks what it hears and asks it before answering
// about workers; the leader's admission loop asks it which workers to
// declare offline. Idle workers long-poll without writing to the log, so
// these in-memory marks are the only trace of them.
//
// It never proposes a command, reads the state or the clock itself, or
// declares a worker offline: callers pass the worker record and the time,
// and decide what follows.
package liveness

import (
	"errors"
	"sync"
	"time"

	"github.com/workron/workron/store"
)

// Config configures a Tracker.
type Config struct {
	// OfflineAfter is how long a worker not heard from counts as alive.
	// Required: no default here (node defaults it to 3 lease TTLs).
	OfflineAfter time.Duration
}

// ErrOfflineAfter is Validate's error for a zero or negative OfflineAfter.
var ErrOfflineAfter = errors.New("liveness: OfflineAfter must be positive")

// Validate reports whether c can build a Tracker.
func (c Config) Validate() error {
	if c.OfflineAfter <= 0 {
		return ErrOfflineAfter
	}
	return nil
}

// Tracker is one node's view of which workers are alive. Its methods are
// safe for concurrent use and quick: Active is called under the FSM's lock
// (fsm.FSM.WorkersWhere) and reads nothing of the state.
type Tracker struct {
	offlineAfter time.Duration
	// heard is when each worker was last heard from on this node (worker
	// id to time.Time).
	heard sync.Map
}

// New builds a Tracker; it fails only if cfg does not validate.
func New(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{offlineAfter: cfg.OfflineAfter}, nil
}

// OfflineAfter is how long a silent worker counts as alive.
func (t *Tracker) OfflineAfter() time.Duration { return t.offlineAfter }

// Heard marks worker id as heard from at at (a long-poll or a heartbeat
// on this node).
func (t *Tracker) Heard(id string, at time.Time) { t.heard.Store(id, at) }

// Forget drops the mark of worker id (a forgotten worker).
func (t *Tracker) Forget(id string) { t.heard.Delete(id) }

// LastSeen is when this node last heard from w: its stored last
// heartbeat, or a later mark.
func (t *Tracker) LastSeen(w *store.Worker) time.Time {
	seen := time.Unix(0, w.LastHeartbeat)
	if at, ok := t.heard.Load(w.ID); ok && at.(time.Time).After(seen) {
		seen = at.(time.Time)
	}
	return seen
}

// Active reports whether this node (the leader, for decisions) counts w
// as alive at now: heard from within OfflineAfter and not declared
// offline since.
func (t *Tracker) Active(w *store.Worker, now time.Time) bool {
	seen := t.LastSeen(w)
	if w.OfflineAt != 0 && w.OfflineAt >= seen.UnixNano() {
		return false
	}
	return now.Sub(seen) <= t.offlineAfter
}
