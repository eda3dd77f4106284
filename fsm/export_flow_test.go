package fsm

// ReadyLen counts the items in a queue's ready trees (tests only).
func ReadyLen(f *FSM, queue string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, t := range f.idx.ready {
		if k.queue == queue {
			n += t.Len()
		}
	}
	return n
}
