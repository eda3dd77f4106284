package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// errBusy means a request's body would take this node past
// Config.MaxBodyBytesInFlight: 503 busy, nothing was read or done.
var errBusy = errors.New("api: too many request body bytes in flight")

// bodyBudget bounds the bytes of request bodies that a node holds at
// once: read, decoded, served or forwarded to the leader. A request takes
// its share before its body is read and gives it back when it has been
// answered; one that finds the budget spent is refused at once.
type bodyBudget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes, or reports false when that would pass the budget.
func (b *bodyBudget) take(n int64) bool {
	for {
		cur := b.used.Load()
		if cur+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// give returns n bytes taken.
func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

// bodyChunk is what a body of unknown length (chunked) takes from the
// budget at a time, as it is read.
const bodyChunk = 64 << 10

// readHeld reads a request body of at most limit bytes (413 beyond)
// within the node's body budget, and returns it with the function that
// gives its share back, to be called once the request is answered. A body
// whose Content-Length passes limit is refused before any of it is read;
// one that the budget has no room for gets errBusy, before any of it is
// read when its length is known, else as soon as the budget runs out.
func (s *Server) readHeld(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, func(), error) {
	n := r.ContentLength
	switch {
	case n > limit:
		return nil, func() {}, tooLarge(limit)
	case n == 0 || r.Body == nil || r.Body == http.NoBody:
		return nil, func() {}, nil
	case n > 0:
		if !s.budget.take(n) {
			return nil, func() {}, errBusy
		}
	}
	taken := max(n, 0)
	var chunked *heldReader
	if n < 0 {
		chunked = &heldReader{r: r.Body, budget: &s.budget}
		r.Body = chunked
	}
	body, err := readBody(w, r, limit)
	if chunked != nil {
		taken = chunked.held
	}
	release := func() { s.budget.give(taken) }
	if err != nil {
		release()
		return nil, func() {}, err
	}
	return body, release, nil
}

// heldReader reads a body of unknown length, taking bodyChunk more of the
// budget each time what it read reaches what it holds.
type heldReader struct {
	r      io.ReadCloser
	budget *bodyBudget
	held   int64
	read   int64
}

func (h *heldReader) Read(p []byte) (int, error) {
	if h.read == h.held {
		if !h.budget.take(bodyChunk) {
			return 0, errBusy
		}
		h.held += bodyChunk
	}
	p = p[:min(int64(len(p)), h.held-h.read)]
	n, err := h.r.Read(p)
	h.read += int64(n)
	return n, err
}

func (h *heldReader) Close() error { return h.r.Close() }

// tooLarge is the reply to a body over its route's limit.
func tooLarge(limit int64) error {
	return &badRequest{reason: fmt.Sprintf("request body is larger than %d bytes", limit), tooBig: true}
}
