package fsm

import "github.com/workron/workron/store"

// JobReader is what ViewJobs gives its function: job pages of one read
// transaction, and the applied index of that state.
type JobReader interface {
	ListJobs(q store.ListQuery) ([]*store.Job, uint64, error)
	Applied() uint64
}

// ViewJobs runs fn with one read transaction of the current state, for a
// reader that walks more than one page and must see a single state (the
// series of GET /stats/series).
func (f *FSM) ViewJobs(fn func(JobReader) error) error {
	return f.view(func(tx *store.Tx) error { return fn(tx) })
}
