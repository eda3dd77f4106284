// Package testcert makes throwaway certificate authorities and node
// certificates for tests, through internal/certs (the one place that makes
// certificates), failing the test on an error. It never reads or writes
// anything but the files a test asks it to write in the test's own
// temporary directory.
package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/internal/certs"
)

// validity is how long a test's certificates are valid.
const validity = 24 * time.Hour

// CA is a certificate authority that lives for one test.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // the CA certificate, PEM-encoded
	ca   *certs.CA
}

// NewCA makes a self-signed CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	ca, err := certs.NewCA(name, validity)
	if err != nil {
		tb.Fatalf("testcert: %v", err)
	}
	return &CA{Cert: ca.Cert, PEM: ca.PEM, ca: ca}
}

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool { return ca.ca.Pool() }

// Leaf is a certificate issued by a CA, with its key.
type Leaf struct {
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate
}

// Issue makes a certificate for a node named name, valid for 127.0.0.1,
// ::1 and localhost, for both server and client authentication (nodes
// present it in both directions).
func (ca *CA) Issue(tb testing.TB, name string) *Leaf {
	tb.Helper()
	l, err := ca.ca.Issue(certs.Spec{Name: name, Hosts: []string{"127.0.0.1", "::1", "localhost"}, Usage: certs.Node, Validity: validity})
	if err != nil {
		tb.Fatalf("testcert: %v", err)
	}
	return &Leaf{CertPEM: l.CertPEM, KeyPEM: l.KeyPEM, TLS: l.TLS}
}

// Files writes the CA certificate and the leaf's certificate and key into
// dir and returns their paths.
func (ca *CA) Files(tb testing.TB, dir string, l *Leaf, name string) (certFile, keyFile, caFile string) {
	tb.Helper()
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	caFile = filepath.Join(dir, name+"-ca.crt")
	for path, data := range map[string][]byte{certFile: l.CertPEM, keyFile: l.KeyPEM, caFile: ca.PEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			tb.Fatalf("testcert: %v", err)
		}
	}
	return certFile, keyFile, caFile
}
