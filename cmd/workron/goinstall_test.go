package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestGoInstall: Workron installs the way Go tools do, and another module
// can import its packages, with nothing but the module itself: no replace
// directive (go install refuses a module whose go.mod has one, and a replace
// never applies to a module that imports this one).
//
// The working tree (what git tracks, and new files it does not ignore) is
// packed as the module at a made-up version into a file:// module proxy;
// every other module comes from this machine's module cache, its
// cache/download directory serving as a second proxy, so nothing is
// fetched from the network, and the module cache the test fills is its own.
// Then:
//   - go install github.com/workron/workron/cmd/workron@VERSION, and the
//     installed binary's `version` reports VERSION;
//   - a module that requires github.com/workron/workron VERSION and imports
//     the Go SDK (worker/client), api and raftnode builds.
func TestGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("packs the module and builds it twice")
	}
	root := moduleRoot(t)
	version := fmt.Sprintf("v0.0.0-test.%d", time.Now().UnixNano())
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	packModule(t, root, proxy, version)

	cache := goEnv(t, "GOMODCACHE")
	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOFLAGS=-modcacherw", // so that t.TempDir can remove it
		"GONOSUMDB=github.com/workron/workron",
		"GOSUMDB=off", // the other modules come from the module cache, checked when they entered it
		"GOBIN="+filepath.Join(tmp, "bin"),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"CGO_ENABLED=0",
	)

	goCmd(t, tmp, env, "install", "github.com/workron/workron/cmd/workron@"+version)
	bin := filepath.Join(tmp, "bin", "workron")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("installed workron version: %v", err)
	}
	var b buildInfo
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("installed workron version: %v: %s", err, out)
	}
	if b.Version != version {
		t.Errorf("installed workron reports version %q, want %q", b.Version, version)
	}

	user := filepath.Join(tmp, "user")
	writeFile(t, filepath.Join(user, "go.mod"), "module example.com/user\n\ngo 1.26\n\nrequire github.com/workron/workron "+version+"\n")
	writeFile(t, filepath.Join(user, "main.go"), `package main

import (
	"fmt"

	"github.com/workron/workron/api"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/worker/client"
)

func main() {
	fmt.Println(client.New, api.New, raftnode.Open)
}
`)
	goCmd(t, user, env, "mod", "tidy")
	goCmd(t, user, env, "build", "-o", filepath.Join(tmp, "user-bin"), ".")
}

// packModule writes the module at root, as version, into a file:// module
// proxy directory: the @v list, .info, .mod and .zip that go reads.
func packModule(t *testing.T, root, proxy, version string) {
	t.Helper()
	m := module.Version{Path: "github.com/workron/workron", Version: version}
	dir := filepath.Join(proxy, "github.com", "workron", "workron", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []modzip.File
	for _, rel := range treeFiles(t, root) {
		files = append(files, dirFile{root: root, rel: rel})
	}
	var zip bytes.Buffer
	if err := modzip.Create(&zip, m, files); err != nil {
		t.Fatalf("pack the module: %v", err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(info),
		version + ".mod":  gomod,
		version + ".zip":  zip.Bytes(),
	} {
		writeFile(t, filepath.Join(dir, name), string(data))
	}
}

// treeFiles lists the working tree's files that git tracks or would (not
// ignored), deleted ones left out, relative to root.
func treeFiles(t *testing.T, root string) []string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to list the module's files")
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): cannot tell the module's files", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); err == nil {
			files = append(files, f)
		}
	}
	return files
}

// dirFile is a file of the working tree, for modzip.Create.
type dirFile struct{ root, rel string }

func (f dirFile) Path() string { return f.rel }

func (f dirFile) Lstat() (os.FileInfo, error) {
	return os.Lstat(filepath.Join(f.root, filepath.FromSlash(f.rel)))
}

func (f dirFile) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.root, filepath.FromSlash(f.rel)))
}

// moduleRoot is the directory of the go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out := goEnv(t, "GOMOD")
	if out == "" || out == os.DevNull {
		t.Fatal("not in a module")
	}
	return filepath.Dir(out)
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

func goCmd(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
