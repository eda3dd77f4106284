package worker

import (
	"sync"
	"unicode/utf8"
)

// ring keeps the last bytes written to it. It is safe for concurrent use.
type ring struct {
	mu    sync.Mutex
	buf   []byte // len(buf) == capacity once full
	size  int    // capacity
	next  int    // where the next byte goes once full
	full  bool
	total int64 // bytes ever written
}

func newRing(size int) *ring {
	return &ring{size: size, buf: make([]byte, 0, size)}
}

// Write keeps the last r.size bytes of everything written. It never fails.
func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	r.total += int64(n)
	if r.size == 0 {
		return n, nil
	}
	if len(p) >= r.size {
		r.buf = append(r.buf[:0], p[len(p)-r.size:]...)
		r.next, r.full = 0, true
		return n, nil
	}
	if !r.full {
		room := r.size - len(r.buf)
		if len(p) <= room {
			r.buf = append(r.buf, p...)
			r.full = len(r.buf) == r.size
			return n, nil
		}
		r.buf = append(r.buf, p[:room]...)
		p = p[room:]
		r.full, r.next = true, 0
	}
	c := copy(r.buf[r.next:], p)
	copy(r.buf, p[c:])
	r.next = (r.next + len(p)) % r.size
	return n, nil
}

// Bytes returns a copy of the kept bytes, oldest first.
func (r *ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]byte, 0, len(r.buf))
	if !r.full {
		return append(out, r.buf...)
	}
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// String returns the kept bytes as text. When older bytes were dropped, a
// UTF-8 sequence cut at the start is dropped too, so the text stays valid.
func (r *ring) String() string {
	b := r.Bytes()
	r.mu.Lock()
	cut := r.total > int64(len(b))
	r.mu.Unlock()
	if cut {
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return string(b)
}
