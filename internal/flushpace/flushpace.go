// Package flushpace paces the flushing of a file written in one long
// stream (a snapshot being written or received, a state file being
// restored): its pages go to the disk as it is written, a step at a time,
// never all at once. One large flush of a file queues every small fsync of
// the Raft log on the same disk behind it (tens of milliseconds at tens of
// megabytes; raftnode/snapstore.go has the measurements). It never writes
// the file and never makes it durable: the writer's own fsync at the end
// does that, and finds at most two steps left to flush.
package flushpace

import (
	"fmt"
	"os"
)

// Pacer starts the write-back of each step of a file as the step is
// written, and then waits for the step before it to reach the disk: the
// disk writes one step while the writer fills the next, where an fsync of
// each step made the writer wait for the disk (and a journal commit) every
// step. On Linux it uses sync_file_range(2); elsewhere it fsyncs every step.
type Pacer struct {
	f       *os.File
	step    int64
	written int64 // bytes written to f from its start, as told by Wrote
	started int64 // write-back started for [0, started)
	waited  int64 // written back: [0, waited)
	flushes int
}

// New paces the flushing of f, a file written from its start, in steps of
// step bytes (at least 1).
func New(f *os.File, step int) *Pacer {
	return &Pacer{f: f, step: int64(max(step, 1))}
}

// Wrote tells the pacer that n more bytes were written to f, after those it
// was told of before. Once a step's worth has been written since the last
// flush, it starts writing them back and waits until the step before them
// is written back. Errors are the kernel's, wrapped.
func (p *Pacer) Wrote(n int) error {
	p.written += int64(n)
	if p.written-p.started < p.step {
		return nil
	}
	if err := flush(p.f, p.waited, p.started, p.written); err != nil {
		return fmt.Errorf("flush %s: %w", p.f.Name(), err)
	}
	p.waited, p.started = p.started, p.written
	p.flushes++
	return nil
}

// Flushes is how many steps the pacer has flushed.
func (p *Pacer) Flushes() int { return p.flushes }
