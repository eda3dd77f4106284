package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// handshakeTimeout bounds an accepted connection's TLS handshake, so a peer
// that connects and says nothing cannot hold a handler forever.
const handshakeTimeout = 10 * time.Second

// tlsStreamLayer is raft.StreamLayer over TLS: every connection, in both
// directions, is authenticated by the configuration (see Config.TLS), so a
// host without a certificate from the cluster's CA can neither send Raft
// RPCs (votes, entries, snapshots) to a node nor receive them from it.
type tlsStreamLayer struct {
	net.Listener // a tls.Listener
	advertise    net.Addr
	cfg          *tls.Config
}

var _ raft.StreamLayer = (*tlsStreamLayer)(nil)

// newTLSTransport listens on bind and returns a Raft transport that speaks
// TLS with cfg, advertising advertise (nil: what it bound).
func newTLSTransport(bind string, advertise net.Addr, cfg *tls.Config, logger hclog.Logger) (*raft.NetworkTransport, error) {
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, errors.New("raftnode: TLS.ClientAuth must be tls.RequireAndVerifyClientCert: every peer must prove it is a member")
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raftnode: %s is not an address peers can dial", advertise)
	}
	layer := &tlsStreamLayer{Listener: tls.NewListener(ln, cfg), advertise: advertise, cfg: cfg}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  logger,
	}), nil
}

// Accept returns the next connection; its handshake runs on its first read
// or write, within handshakeTimeout, so one slow peer does not hold up the
// others' accepts.
func (l *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c.(*tls.Conn)}, nil
}

// Addr is the advertised address.
func (l *tlsStreamLayer) Addr() net.Addr { return l.advertise }

// Dial connects to a peer and completes the handshake within timeout: the
// peer's certificate must be signed by the CA and name the address dialed.
func (l *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: l.cfg}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("raft tls dial %s: %w", address, err)
	}
	return c, nil
}

// handshakeConn is an accepted TLS connection that completes its handshake,
// with a deadline, before the first byte is read or written.
type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(handshakeTimeout))
		c.err = c.Conn.Handshake()
		_ = c.Conn.SetDeadline(time.Time{})
	})
	return c.err
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *handshakeConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
