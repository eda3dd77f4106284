package fsm

import "github.com/workron/workron/store"

// StoreSize reads the state file's size and how much of it is in use (see
// store.Size), for the node's gauges.
func (f *FSM) StoreSize() (store.Size, error) {
	f.stMu.RLock()
	defer f.stMu.RUnlock()
	return f.st.Size()
}
