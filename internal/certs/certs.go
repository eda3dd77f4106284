// Package certs makes the certificates a Workron cluster's TLS needs: a
// certificate authority, node certificates (valid for the names and
// addresses the node is reached at, for both server and client
// authentication, since nodes present them in both directions) and client
// certificates. Keys are ECDSA P-256. It owns the templates and PEM
// encoding; it never decides where files go (the CLI does) and never
// trusts anything itself.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// ErrNotCA is returned by LoadCA for a certificate that may not sign others.
var ErrNotCA = errors.New("certs: not a certificate authority")

// CA is a certificate authority: its certificate and its key.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // the certificate, PEM-encoded
	key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA named name, valid from an hour ago (clock
// skew) for validity.
func NewCA(name string, validity time.Duration) (*CA, error) {
	if name == "" || validity <= 0 {
		return nil, errors.New("certs: a CA needs a name and a positive validity")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA: %w", err)
	}
	return &CA{Cert: cert, PEM: pemBlock("CERTIFICATE", der), key: key}, nil
}

// LoadCA reads a CA from its PEM certificate and key (as KeyPEM and PEM
// wrote them).
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate and key: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA: %w", err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("certs: %s: %w", cert.Subject.CommonName, ErrNotCA)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("certs: the CA key is not an ECDSA key")
	}
	return &CA{Cert: cert, PEM: certPEM, key: key}, nil
}

// KeyPEM is the CA's private key, PEM-encoded: keep it secret.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.key) }

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Usage says what a leaf certificate is for.
type Usage int

const (
	// Node certificates serve HTTPS and Raft and present themselves to
	// other nodes: server and client authentication.
	Node Usage = iota
	// Client certificates authenticate a CLI, worker or SDK to the nodes.
	Client
)

// Spec is what Issue makes.
type Spec struct {
	// Name is the subject's common name (a node id, a client's name).
	Name string
	// Hosts are the DNS names and IP addresses a node is reached at; each
	// goes into the certificate's subject alternative names. A Node needs
	// at least one; a Client needs none.
	Hosts []string
	Usage Usage
	// Validity is how long the certificate is valid, from now.
	Validity time.Duration
}

// Leaf is an issued certificate and its key.
type Leaf struct {
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate
}

// Issue makes a certificate signed by ca as s says.
func (ca *CA) Issue(s Spec) (*Leaf, error) {
	if s.Name == "" {
		return nil, errors.New("certs: a certificate needs a name")
	}
	if s.Validity <= 0 {
		return nil, errors.New("certs: a certificate needs a positive validity")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: s.Name},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(s.Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if s.Usage == Node {
		if len(s.Hosts) == 0 {
			return nil, fmt.Errorf("certs: node %s needs at least one host name or address", s.Name)
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	for _, h := range s.Hosts {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			return nil, errors.New("certs: an empty host name")
		case net.ParseIP(h) != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(h))
		case strings.ContainsAny(h, " /:@"):
			return nil, fmt.Errorf("certs: host %q is neither a DNS name nor an IP address", h)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if s.Validity > time.Until(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter // never outlive the CA
	}
	var err error
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: issue %s: %w", s.Name, err)
	}
	l := &Leaf{CertPEM: pemBlock("CERTIFICATE", der)}
	if l.KeyPEM, err = keyPEM(key); err != nil {
		return nil, err
	}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		return nil, fmt.Errorf("certs: key pair of %s: %w", s.Name, err)
	}
	return l, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal key: %w", err)
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n, nil
}
