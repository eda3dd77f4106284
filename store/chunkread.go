package store

import (
	"fmt"
	"io"
)

// Chunked reads for walkPages: one read of a few KiB a page costs a system
// call a page, which at 1,000,000 jobs (400,000 pages) was most of a
// start's VerifyPages. chunkReader reads the file in aligned chunks of
// chunkSize bytes and serves the walk's page reads from the last few chunks
// it read. It changes only how the bytes are fetched: the walk checks every
// page as before, and a read past the end of the file still fails.
const (
	chunkSize   = 2 << 20 // bytes a read
	chunkCached = 8       // chunks kept: the walk's pages of one bucket are near one another
)

type chunk struct {
	off  int64  // file offset of data[0], a multiple of chunkSize
	data []byte // what the read returned: short only at the end of the file
	used uint64 // when it last served a read, for eviction
}

// chunkReader is an io.ReaderAt over f, for one goroutine.
type chunkReader struct {
	f      io.ReaderAt
	chunks []*chunk
	clock  uint64
}

func newChunkReader(f io.ReaderAt) *chunkReader { return &chunkReader{f: f} }

// ReadAt fills p from off, a chunk at a time. Reads larger than a chunk (a
// page with many overflow pages) go to the file directly.
func (r *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at %d: negative offset", off)
	}
	if len(p) > chunkSize {
		return r.f.ReadAt(p, off)
	}
	n := 0
	for n < len(p) {
		c, err := r.chunk(off + int64(n))
		if err != nil {
			return n, err
		}
		at := off + int64(n) - c.off
		if at >= int64(len(c.data)) {
			return n, io.EOF
		}
		n += copy(p[n:], c.data[at:])
	}
	return n, nil
}

// chunk returns the chunk holding offset off, reading it if it is not kept.
func (r *chunkReader) chunk(off int64) (*chunk, error) {
	r.clock++
	start := off - off%chunkSize
	for _, c := range r.chunks {
		if c.off == start {
			c.used = r.clock
			return c, nil
		}
	}
	var c *chunk
	if len(r.chunks) < chunkCached {
		c = &chunk{data: make([]byte, chunkSize)}
		r.chunks = append(r.chunks, c)
	} else {
		c = r.chunks[0]
		for _, o := range r.chunks[1:] {
			if o.used < c.used {
				c = o
			}
		}
	}
	c.off, c.used = start, r.clock
	c.data = c.data[:cap(c.data)]
	m, err := r.f.ReadAt(c.data, start)
	c.data = c.data[:m]
	if err != nil && err != io.EOF {
		c.off = -1 // nothing valid kept under this chunk's offset
		return nil, err
	}
	return c, nil
}
