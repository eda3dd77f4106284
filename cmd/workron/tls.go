package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/workron/workron/internal/certs"
)

const tlsUsage = `workron tls: make the certificates a cluster's TLS needs (ECDSA P-256).

  workron tls ca     [--dir DIR] [--name NAME] [--days N]
        a certificate authority: DIR/ca.crt (give to every node and client)
        and DIR/ca.key (keep it secret, off the nodes if you can)
  workron tls node   [--dir DIR] --id ID --hosts NAME,IP,... [--days N]
        a node's certificate, DIR/ID.crt and DIR/ID.key, valid for the names
        and addresses the node is reached at, for server and client
        authentication (nodes present it to each other)
  workron tls client [--dir DIR] --name NAME [--days N]
        a client certificate, DIR/NAME.crt and DIR/NAME.key

DIR defaults to the current directory; node and client read DIR/ca.crt and
DIR/ca.key. No file is ever overwritten. Then start each node with
  --tls-cert DIR/ID.crt --tls-key DIR/ID.key --tls-ca DIR/ca.crt
`

// runTLS makes a CA, a node certificate or a client certificate.
func runTLS(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, tlsUsage)
		if len(args) == 0 {
			return &exitError{code: 2}
		}
		return flag.ErrHelp
	}
	kind, rest := args[0], args[1:]
	fs := flag.NewFlagSet("tls "+kind, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".", "directory of the CA and of the files made")
	days := fs.Int("days", 0, "validity in days (default: CA 3650, node and client 825)")
	var name, id, hosts string
	switch kind {
	case "ca":
		fs.StringVar(&name, "name", "workron CA", "the CA's common name")
	case "node":
		fs.StringVar(&id, "id", "", "the node's id (its file names and common name)")
		fs.StringVar(&hosts, "hosts", "", "comma-separated DNS names and IP addresses the node is reached at")
	case "client":
		fs.StringVar(&name, "name", "", "the client's name (its file names and common name)")
	default:
		fmt.Fprintf(stderr, "workron tls: unknown kind %q\n\n%s", kind, tlsUsage)
		return &exitError{code: 2}
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tls %s: unexpected argument %q", kind, fs.Arg(0))
	}
	if *days < 0 {
		return fmt.Errorf("tls %s: --days must be positive", kind)
	}
	validity := func(def int) time.Duration {
		if *days == 0 {
			return time.Duration(def) * 24 * time.Hour
		}
		return time.Duration(*days) * 24 * time.Hour
	}
	if kind == "ca" {
		ca, err := certs.NewCA(name, validity(3650))
		if err != nil {
			return fmt.Errorf("tls ca: %w", err)
		}
		key, err := ca.KeyPEM()
		if err != nil {
			return fmt.Errorf("tls ca: %w", err)
		}
		return writeNew(stdout, *dir, "ca", ca.PEM, key)
	}
	ca, err := loadCA(*dir)
	if err != nil {
		return fmt.Errorf("tls %s: %w", kind, err)
	}
	spec := certs.Spec{Name: name, Usage: certs.Client, Validity: validity(825)}
	if kind == "node" {
		if id == "" || hosts == "" {
			return errors.New("tls node: --id and --hosts are required")
		}
		spec = certs.Spec{Name: id, Hosts: splitList(hosts), Usage: certs.Node, Validity: validity(825)}
	} else if name == "" {
		return errors.New("tls client: --name is required")
	}
	if !validFileName(spec.Name) {
		return fmt.Errorf("tls %s: %q is not usable as a file name (letters, digits, '.', '_', '-')", kind, spec.Name)
	}
	leaf, err := ca.Issue(spec)
	if err != nil {
		return fmt.Errorf("tls %s: %w", kind, err)
	}
	return writeNew(stdout, *dir, spec.Name, leaf.CertPEM, leaf.KeyPEM)
}

func loadCA(dir string) (*certs.CA, error) {
	cert, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read the CA (make one with workron tls ca): %w", err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, fmt.Errorf("read the CA's key: %w", err)
	}
	return certs.LoadCA(cert, key)
}

// writeNew writes DIR/NAME.crt (0644) and DIR/NAME.key (0600), refusing to
// overwrite either.
func writeNew(stdout io.Writer, dir, name string, cert, key []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	crt, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for _, p := range []string{crt, kf} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s exists: not overwritten (remove it first)", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.WriteFile(kf, key, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(crt, cert, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", crt, kf)
	return nil
}

func validFileName(s string) bool {
	if s == "" || s == "." || s == ".." || s == "ca" {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
