// Package connlimit caps the connections an HTTP server holds open at once,
// so that a flood of idle connections cannot take every file descriptor of
// the process. At the cap, a new connection takes the place of the oldest
// one that carries no request (accepted but silent so far, or idle between
// requests), which is closed; when every connection is busy with a request,
// Accept waits for one to end or fall idle, and the new ones wait in the
// kernel's backlog. It never reads or writes a connection; it learns what
// each one does from net/http's ConnState hook.
package connlimit

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// Listener is a net.Listener that holds at most Max connections open. Set
// its ConnState as the http.Server's ConnState: without it, connections are
// never known to be idle or closed, and Accept stops at the cap for good.
// Its methods are safe for concurrent use.
type Listener struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[net.Conn]*entry
	quiet *list.List // of *entry: the connections that carry no request, oldest first

	changed chan struct{} // a connection closed or fell quiet
	done    chan struct{} // closed by Close
	once    sync.Once
}

type entry struct {
	conn  net.Conn
	quiet *list.Element // nil while it carries a request
}

// New caps ln at max open connections; max must be at least 1.
func New(ln net.Listener, max int) *Listener {
	return &Listener{
		Listener: ln,
		max:      max,
		conns:    make(map[net.Conn]*entry),
		quiet:    list.New(),
		changed:  make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// Accept returns the next connection. At the cap it first closes the
// oldest connection that carries no request, or, with none, waits until
// one closes or falls quiet. After Close it returns net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		victim, ok := l.admit(c)
		if victim != nil {
			victim.Close()
		}
		if ok {
			return c, nil
		}
		select {
		case <-l.changed:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// admit takes c in if there is room, making room by dropping the oldest
// quiet connection if needed; it returns that connection, for the caller
// to close, and whether c was taken in.
func (l *Listener) admit(c net.Conn) (victim net.Conn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		front := l.quiet.Front()
		if front == nil {
			return nil, false
		}
		e := front.Value.(*entry)
		l.forgetLocked(e)
		victim = e.conn
	}
	e := &entry{conn: c}
	e.quiet = l.quiet.PushBack(e) // silent until net/http reads a request
	l.conns[c] = e
	return victim, true
}

// ConnState is the http.Server's ConnState hook: it tracks which
// connections carry a request and frees the place of those that end.
func (l *Listener) ConnState(c net.Conn, state http.ConnState) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn() // a *tls.Conn over one of ours
	}
	l.mu.Lock()
	e, ok := l.conns[c]
	if !ok { // closed to make room, or not ours
		l.mu.Unlock()
		return
	}
	switch state {
	case http.StateActive:
		if e.quiet != nil {
			l.quiet.Remove(e.quiet)
			e.quiet = nil
		}
	case http.StateNew, http.StateIdle:
		if e.quiet != nil {
			l.quiet.Remove(e.quiet)
		}
		e.quiet = l.quiet.PushBack(e) // quiet since now: the newest
	case http.StateClosed, http.StateHijacked:
		l.forgetLocked(e)
	}
	l.mu.Unlock()
	if state != http.StateActive {
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
}

func (l *Listener) forgetLocked(e *entry) {
	if e.quiet != nil {
		l.quiet.Remove(e.quiet)
		e.quiet = nil
	}
	delete(l.conns, e.conn)
}

// Open is the number of connections held open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Close closes the listener; an Accept waiting at the cap returns
// net.ErrClosed. Connections already accepted are the server's to close.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}
