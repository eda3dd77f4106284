//go:build unix

package python_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/ports"
	"github.com/workron/workron/internal/testkit/proccluster"
)

// TestExampleFindsTheQuickStartCluster runs example.py as a user would
// after `scripts/cluster.sh up`: no WORKRON_SERVER, no flags. The client's
// default nodes must be the CLI's (the dev node, then the cluster's three),
// and with them it must find a three-node cluster of the real binary while
// no dev node runs. The test cannot bind the quick starts' fixed ports, so
// it runs the example with DEFAULT_SERVERS pointing at the same shape: a
// refused port where the dev node would be, then the cluster's nodes.
func TestExampleFindsTheQuickStartCluster(t *testing.T) {
	python := needPython(t)
	cli := cliDefaultServers(t)
	out, err := exec.Command(python, "-c", "from workron.client import DEFAULT_SERVERS; print(','.join(DEFAULT_SERVERS))").CombinedOutput()
	if err != nil {
		t.Fatalf("read the client's DEFAULT_SERVERS: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strings.Join(cli, ",") {
		t.Fatalf("the Python client's DEFAULT_SERVERS are %s; the CLI's (cmd/workron defaultServers) are %s", got, strings.Join(cli, ","))
	}
	if len(cli) != 4 || !strings.HasSuffix(cli[0], ":7070") {
		t.Fatalf("defaultServers %v: this test expects the dev node, then three cluster nodes", cli)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := proccluster.Start(ctx, proccluster.Config{Bin: buildWorkron(t, dir), Dir: dir,
		Args: []string{"--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(0)
	if err := c.WaitFormed(ctx, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, c.Logs(20))
	}
	free, err := ports.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	servers := append([]string{"http://127.0.0.1:" + strconv.Itoa(free[0])}, c.URLs()...) // no dev node there

	run := "import runpy, sys\nimport workron.client\nworkron.client.DEFAULT_SERVERS = tuple(sys.argv[1].split(','))\nrunpy.run_path('example.py', run_name='__main__')\n"
	cmd := exec.CommandContext(ctx, python, "-c", run, strings.Join(servers, ","))
	cmd.Env = append(os.Environ(), "WORKRON_SERVER=", "WORKRON_TOKEN=", "WORKRON_TLS_CA=", "PYTHONPATH=.", "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 5 * time.Second
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example.py against %v: %v\n%s\n%s", servers, err, out, c.Logs(20))
	}
	for _, want := range []string{"attempt 1: sending to ada@example.com", "finished: done"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("example.py printed no %q:\n%s", want, out)
		}
	}
}

// needPython returns python3's path, skipping the test without it (failing
// under CI=true, where it must be installed).
func needPython(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI=true: .ci/run installs it")
		}
		t.Skip("no python3 on PATH")
	}
	return python
}

// buildWorkron builds ./cmd/workron into dir and returns the binary's path.
func buildWorkron(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "workron")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/workron").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cliDefaultServers reads cmd/workron's defaultServers, the nodes the CLI
// tries when given none.
func cliDefaultServers(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../cmd/workron/main.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if len(v.Names) == 1 && v.Names[0].Name == "defaultServers" && len(v.Values) == 1 {
				if lit, ok := v.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					return strings.Split(s, ",")
				}
			}
		}
	}
	t.Fatal("cmd/workron/main.go has no const defaultServers = \"...\"")
	return nil
}
