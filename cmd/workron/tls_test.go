package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/syncbuf"
)

// tlsVerb runs `workron tls ARGS...` and returns its output.
func tlsVerb(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"tls"}, args...), &out, &errOut)
	return out.String() + errOut.String(), err
}

// TestTLSVerbMakesAWorkingCluster makes a CA, three node certificates and
// a client certificate with `workron tls`, starts a three-node cluster
// with mutual TLS on them (Raft over TLS 1.3 with both ends verified, the
// joins authenticated by the node certificates), and checks an HTTPS
// client that trusts only the CA reaches it; a client certificate is not
// a member's.
func TestTLSVerbMakesAWorkingCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	dir := t.TempDir()
	if out, err := tlsVerb(t, "ca", "--dir", dir, "--name", "test CA"); err != nil {
		t.Fatalf("tls ca: %v\n%s", err, out)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		if out, err := tlsVerb(t, "node", "--dir", dir, "--id", id, "--hosts", "127.0.0.1,localhost"); err != nil {
			t.Fatalf("tls node %s: %v\n%s", id, err, out)
		}
	}
	if out, err := tlsVerb(t, "client", "--dir", dir, "--name", "alice"); err != nil {
		t.Fatalf("tls client: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(dir, "n1.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("n1.key: %v, mode %v, want 0600", err, fi.Mode())
	}

	caFile := filepath.Join(dir, "ca.crt")
	var urls []string
	for i, id := range []string{"n1", "n2", "n3"} {
		args := []string{"--id", id, "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0", "--data", filepath.Join(dir, "data-"+id),
			"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms",
			"--tls-cert", filepath.Join(dir, id+".crt"), "--tls-key", filepath.Join(dir, id+".key"), "--tls-ca", caFile}
		if i == 0 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", urls[0])
		}
		srv, _ := inProcessNode(t, args...)
		urls = append(urls, srv.advertise)
		if !strings.HasPrefix(srv.advertise, "https://") {
			t.Fatalf("%s advertises %s, want https", id, srv.advertise)
		}
	}

	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	pollUntil(t, 30*time.Second, func() error {
		for _, u := range urls {
			resp, err := hc.Get(u + "/cluster?stale=1")
			if err != nil {
				return err
			}
			var cl struct {
				Leader string `json:"leader"`
				Nodes  []struct {
					ID string `json:"id"`
				} `json:"nodes"`
			}
			err = json.NewDecoder(resp.Body).Decode(&cl)
			resp.Body.Close()
			if err != nil || len(cl.Nodes) != 3 || cl.Leader == "" {
				return fmt.Errorf("%s: %d members, leader %q, %v", u, len(cl.Nodes), cl.Leader, err)
			}
		}
		return nil
	})

	// alice's certificate passes the handshake, but a join with it is
	// refused: only node certificates make members.
	alice, err := tls.LoadX509KeyPair(filepath.Join(dir, "alice.crt"), filepath.Join(dir, "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	atr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{alice}}}
	t.Cleanup(atr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: atr, Timeout: 5 * time.Second}).Post(urls[0]+"/cluster/join", "application/json",
		strings.NewReader(`{"id":"n9","raft":"127.0.0.1:9","http":"https://127.0.0.1:9"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a join with a client certificate: %d, want 403", resp.StatusCode)
	}
}

// TestTLSVerbRefuses: bad input names what is wrong and writes nothing;
// nothing is ever overwritten.
func TestTLSVerbRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := tlsVerb(t, "node", "--dir", dir, "--id", "n1", "--hosts", "localhost"); err == nil || !strings.Contains(err.Error(), "workron tls ca") {
		t.Errorf("node without a CA: %v, want a hint to make one", err)
	}
	if out, err := tlsVerb(t, "ca", "--dir", dir); err != nil {
		t.Fatalf("tls ca: %v\n%s", err, out)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	for name, args := range map[string][]string{
		"CAAgain":       {"ca", "--dir", dir},
		"NodeNoHosts":   {"node", "--dir", dir, "--id", "n1"},
		"NodeBadHost":   {"node", "--dir", dir, "--id", "n1", "--hosts", "http://x"},
		"NodeBadName":   {"node", "--dir", dir, "--id", "../n1", "--hosts", "localhost"},
		"ClientNoName":  {"client", "--dir", dir},
		"NegativeDays":  {"client", "--dir", dir, "--name", "bob", "--days", "-1"},
		"UnknownKind":   {"server", "--dir", dir},
		"ExtraArgument": {"client", "--dir", dir, "--name", "bob", "extra"},
	} {
		t.Run(name, func(t *testing.T) {
			if out, err := tlsVerb(t, args...); err == nil {
				t.Fatalf("accepted: %s", out)
			}
		})
	}
	after, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	if !bytes.Equal(before, after) {
		t.Error("the CA key was overwritten")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files %v, want only ca.crt and ca.key", names)
	}
}

// TestVersion: `workron version` names the protocol and the Go version.
func TestVersion(t *testing.T) {
	var out syncbuf.Buffer
	if err := run(context.Background(), []string{"version", "-o", "json"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var b buildInfo
	if err := json.Unmarshal([]byte(out.String()), &b); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if b.Protocol != fsm.ProtocolVersion || !strings.HasPrefix(b.Go, "go") || b.Version == "" || b.Platform == "" {
		t.Errorf("version %+v", b)
	}
	var text syncbuf.Buffer
	if err := run(context.Background(), []string{"version"}, &text, &text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), fmt.Sprintf("protocol: %d", fsm.ProtocolVersion)) {
		t.Errorf("text output %q names no protocol", text.String())
	}
	if err := run(context.Background(), []string{"version", "-o", "yaml"}, &text, &text); err == nil {
		t.Error("-o yaml accepted")
	}
}
