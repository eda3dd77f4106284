package fsm

import "slices"

// PendingIDs checks the index's intern tables against its items and lists
// the ids its items give back, sorted (tests only).
func PendingIDs(f *FSM) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.idx.checkInterns(); err != nil {
		return nil, err
	}
	var out []string
	for _, it := range f.idx.items() {
		out = append(out, f.idx.idOf(it))
	}
	slices.Sort(out)
	return out, nil
}
