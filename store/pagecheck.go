package store

import (
	"errors"
	"fmt"
	"os"
)

// The page check of an open state file: VerifyPages' checks, run while the
// store serves (raftnode runs it in the background after a start that did
// not need it first).

var (
	// ErrCheckStopped means a page check was stopped before it ended: it
	// found nothing, and checked nothing whole.
	ErrCheckStopped = errors.New("store: page check stopped")
)

// stopperEvery is how many pages or keys a walk reads between two looks at
// its stop channel.
const stopperEvery = 4096

// stopper tells a walk, every stopperEvery calls, whether stop was closed.
// A nil stop never stops.
type stopper struct {
	stop <-chan struct{}
	n    int
}

func (s *stopper) stopped() bool {
	if s.stop == nil {
		return false
	}
	if s.n++; s.n%stopperEvery != 0 {
		return false
	}
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// PageCheck is VerifyPages' check of an open store's file as of the moment
// NewPageCheck was called, to run later while the store serves. It holds a
// Snapshot (a read transaction) until Close: bbolt reuses none of the pages
// it reads meanwhile, so the file's pages do not change under it, but the
// file grows by what is written meanwhile, and a write that must grow the
// memory map waits for it (as behind any long snapshot).
type PageCheck struct {
	sn       *Snapshot
	f        *os.File
	freelist uint64
}

// NewPageCheck takes the snapshot and opens the file a PageCheck reads. Call
// it before anything else writes to a store just opened: it reads the
// freelist page's id from the meta page of the snapshot's transaction,
// which two commits later is overwritten.
func (s *Store) NewPageCheck() (*PageCheck, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("page check: %w", err)
	}
	f, err := os.Open(s.path)
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil && !os.SameFile(fi, sn.refs.file) {
			err = errors.New("the file at the path is not the one open")
		}
	}
	if err != nil {
		sn.Close()
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("page check: %w", err)
	}
	c := &PageCheck{sn: sn, f: f}
	var ok bool
	if c.freelist, ok = metaFreelist(f, sn.db.Info().PageSize, uint64(sn.tx.ID())); !ok {
		c.Close()
		return nil, fmt.Errorf("page check: no meta page of transaction %d (the file was written since it was opened)", sn.tx.ID())
	}
	return c, nil
}

// Run checks the pages: the size, every page tree walked without bbolt,
// every key read through bbolt, the freelist page and the format. A
// damaged file gives an error wrapping ErrDamaged, and a panic or fault
// bbolt meets while reading is recovered as such (for this goroutine only:
// another goroutine reading the same page still crashes). Closing stop
// ends it early with ErrCheckStopped. It reads the whole file once: at
// 10,000,000 jobs (6.8 GB), seconds to a minute.
func (c *PageCheck) Run(stop <-chan struct{}) (Info, error) {
	fi, err := c.f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("page check: %w", err)
	}
	info := Info{Size: fi.Size()}
	err = guarded(func() error { return checkPages(c.f, c.sn.tx, c.sn.db.Info().PageSize, c.freelist, &info, stop) })
	return info, err
}

// Close releases the snapshot and the file. Safe to call twice.
func (c *PageCheck) Close() {
	c.sn.Close()
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
}
