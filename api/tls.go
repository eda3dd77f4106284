package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
)

// TLSFiles are a node's certificate and key and, optionally, the CA that
// signed every node's certificate. Build them with LoadTLS; each method
// returns a fresh tls.Config for one use.
//
// The certificate can be swapped while the node serves (SwapCert, on
// SIGHUP): every configuration asks for the current one at each handshake.
// The CA is fixed at start.
type TLSFiles struct {
	cert atomic.Pointer[tls.Certificate]
	ca   *x509.CertPool // nil: no --tls-ca; peers are checked against the system roots
}

// SwapCert makes n's certificate the one t presents, from the next
// handshake on. Connections already open keep theirs.
func (t *TLSFiles) SwapCert(n *TLSFiles) {
	t.cert.Store(n.cert.Load())
}

func (t *TLSFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return t.cert.Load(), nil
}

func (t *TLSFiles) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return t.cert.Load(), nil
}

// LoadTLS reads a PEM certificate (chain) and its key, and a PEM CA bundle
// if caFile is not empty. A node's certificate must name the host its
// peers dial (an IP or DNS subject alternative name) and, when the CA is
// given, be good for both server and client authentication, since nodes
// present it in both directions.
func LoadTLS(certFile, keyFile, caFile string) (*TLSFiles, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: give both a certificate and its key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load certificate %s and key %s: %w", certFile, keyFile, err)
	}
	t := &TLSFiles{}
	t.cert.Store(&cert)
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read CA: %w", err)
		}
		t.ca = x509.NewCertPool()
		if !t.ca.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", caFile)
		}
	}
	return t, nil
}

// NewTLSFiles is LoadTLS from memory, for tests and embedding: a parsed
// certificate and a CA pool (nil for the system roots).
func NewTLSFiles(cert tls.Certificate, ca *x509.CertPool) *TLSFiles {
	t := &TLSFiles{ca: ca}
	t.cert.Store(&cert)
	return t
}

// Mutual reports whether a CA was given, so nodes authenticate each other.
func (t *TLSFiles) Mutual() bool { return t.ca != nil }

// Server is the HTTPS API's configuration. With a CA, a client
// certificate is asked for and, if one is sent, must be signed by it;
// clients without one (CLI, workers, browsers) are served too, and the
// bearer tokens decide what they may do.
func (t *TLSFiles) Server() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: t.getCertificate}
	if t.ca != nil {
		c.ClientCAs = t.ca
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// Client is the configuration of the node's own requests to peers: it
// trusts the CA (or the system roots) and presents the node's certificate.
func (t *TLSFiles) Client() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: t.ca, GetClientCertificate: t.getClientCertificate}
}

// Raft is the configuration of the Raft transport, for both directions:
// TLS 1.3, and both ends must present a certificate signed by the CA. Nil
// without a CA: Raft then stays plain TCP (see raftnode.Config.TLS).
func (t *TLSFiles) Raft() *tls.Config {
	if t.ca == nil {
		return nil
	}
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetCertificate:       t.getCertificate,
		GetClientCertificate: t.getClientCertificate,
		RootCAs:              t.ca,
		ClientCAs:            t.ca,
		ClientAuth:           tls.RequireAndVerifyClientCert,
	}
}

// setClientTLS makes the node's requests to peers use Config.ClientTLS.
func (s *Server) setClientTLS() {
	if s.cfg.ClientTLS == nil {
		return
	}
	for _, rt := range []http.RoundTripper{s.client.Transport, s.proxy.Transport} {
		if tr, ok := rt.(*http.Transport); ok {
			tr.TLSClientConfig = s.cfg.ClientTLS.Clone()
		}
	}
}
