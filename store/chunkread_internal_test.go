package store

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestChunkReaderReadsAsTheFileDoes reads a file a bit longer than three
// chunks through chunkReader: reads within a chunk, across a chunk's end,
// larger than a chunk, and back and forth past its few kept chunks return the
// file's bytes, and a read past the end fails as the file's own does.
func TestChunkReaderReadsAsTheFileDoes(t *testing.T) {
	data := make([]byte, 3*chunkSize+5000)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	f := bytes.NewReader(data)
	r := newChunkReader(f)
	reads := []struct{ off, n int }{
		{0, 4096}, {chunkSize - 100, 4096}, {2*chunkSize + 4096, 4096}, {10, chunkSize + 10},
		{3 * chunkSize, 5000}, {4096, 1}, {len(data) - 1, 1},
	}
	for i := range 2 * chunkCached {
		reads = append(reads, struct{ off, n int }{(i * 7919 * 4096) % (len(data) - 4096), 4096})
	}
	for _, rd := range reads {
		p := make([]byte, rd.n)
		if n, err := r.ReadAt(p, int64(rd.off)); err != nil || n != rd.n {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", rd.n, rd.off, n, err)
		}
		if !bytes.Equal(p, data[rd.off:rd.off+rd.n]) {
			t.Fatalf("ReadAt(%d bytes at %d): not the file's bytes", rd.n, rd.off)
		}
	}
	for _, off := range []int{len(data) - 10, len(data), len(data) + chunkSize} {
		if n, err := r.ReadAt(make([]byte, 4096), int64(off)); !errors.Is(err, io.EOF) || n >= 4096 {
			t.Errorf("ReadAt(4096 bytes at %d of %d) = %d, %v; want a short read and io.EOF", off, len(data), n, err)
		}
	}
}
