package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// modulePath is the module whose packages the layout test checks.
const modulePath = "github.com/workron/workron"

// TestLayout checks that every import between the module's packages
// points down the layout docs/DESIGN.md draws: each arrow (package →
// package it imports, tests left out) must be named in the "imports"
// column of the row of the importing package's folder (its own, else the
// nearest parent's) in the table under "Layout and the real arrows". A
// cell of "all" allows every package, `x/*` every package under x, and
// anything else names packages one by one. Every package needs a row, so
// a new package is drawn before it lands. A few arrows stay forbidden
// whatever the table says (forbiddenArrows).
func TestLayout(t *testing.T) {
	rows := layoutRows(t, filepath.Join(repoRoot, "docs", "DESIGN.md"))
	pkgs := modulePackages(t)
	for _, p := range pkgs {
		row, ok := rowOf(rows, p.rel)
		if !ok {
			t.Errorf("package %s has no row in docs/DESIGN.md's layout table: add one (owns, never does, imports)", p.rel)
			continue
		}
		for _, imp := range p.imports {
			if why := forbidden(p.rel, imp); why != "" {
				t.Errorf("%s → %s: %s", p.rel, imp, why)
				continue
			}
			if !row.allows(imp) {
				t.Errorf("%s → %s: not an arrow of docs/DESIGN.md's layout table (row %s allows %s); move the thing down, or if the design changed, change the table in the same commit",
					p.rel, imp, row.folder, row.describe())
			}
		}
	}
}

// forbiddenArrows are the arrows the layout never allows, whatever the
// table says: from stands for a folder and every package below it, to for
// one package.
var forbiddenArrows = []struct{ from, to, why string }{
	{"api", "leader", "api and leader never import each other (node wires them)"},
	{"leader", "api", "api and leader never import each other (node wires them)"},
	{"worker", "api", serverSide},
	{"worker", "api/ui", serverSide},
	{"worker", "node", serverSide},
	{"worker", "leader", serverSide},
	{"worker", "dispatch", serverSide},
	{"worker", "liveness", serverSide},
	{"worker", "raftnode", serverSide},
	{"worker", "fsm", serverSide},
	{"worker", "store", serverSide},
}

const serverSide = "a worker never imports the server side (api/wire is the contract)"

// forbidden says why the arrow from → to is never allowed, or "".
func forbidden(from, to string) string {
	for _, a := range forbiddenArrows {
		if under(from, a.from) && to == a.to {
			return a.why
		}
	}
	// Test support and tooling are imported only by tests, by each other
	// and by the binary.
	support := func(p string) bool { return under(p, "internal/testkit") || under(p, "internal/tools") }
	if support(to) && !support(from) && !under(from, "cmd") {
		return "internal/testkit and internal/tools are imported only by tests, tools and cmd"
	}
	return ""
}

// under reports whether package p is dir or a package below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// layoutRow is one row of the layout table: a folder and what its
// packages may import.
type layoutRow struct {
	folder  string   // "api/wire", without the trailing slash
	all     bool     // "all"
	exact   []string // packages named one by one
	subtree []string // `x/*`: every package under x
}

func (r layoutRow) allows(p string) bool {
	if r.all || slices.Contains(r.exact, p) {
		return true
	}
	for _, d := range r.subtree {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (r layoutRow) describe() string {
	if r.all {
		return "all"
	}
	var names []string
	names = append(names, r.exact...)
	for _, d := range r.subtree {
		names = append(names, d+"/*")
	}
	if len(names) == 0 {
		return "no package of the module"
	}
	return strings.Join(names, ", ")
}

// rowOf is the row of p's folder, else of its nearest parent folder.
func rowOf(rows map[string]layoutRow, p string) (layoutRow, bool) {
	for dir := p; dir != "." && dir != ""; dir = filepath.ToSlash(filepath.Dir(dir)) {
		if r, ok := rows[dir]; ok {
			return r, true
		}
	}
	return layoutRow{}, false
}

// backticked is a `code` span.
var backticked = regexp.MustCompile("`([^`]+)`")

// modulePackageName is what a cell's code span must look like to name a
// package of the module (a path, or a path with /*); others (a file, a
// function, an error) are prose.
var modulePackageName = regexp.MustCompile(`^[a-z][a-z0-9]*(/[a-z][a-z0-9]*)*(/\*)?$`)

// layoutRows reads the layout table of the design document: folder to row.
func layoutRows(t *testing.T, path string) map[string]layoutRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]layoutRow{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	in := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Layout and the real arrows"
			continue
		case !in || !strings.HasPrefix(line, "| `"):
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("docs/DESIGN.md:%d: a layout row has %d cells, want 4 (folder | owns | never does | imports); a | inside a cell splits it", n, len(cells))
		}
		m := backticked.FindStringSubmatch(cells[0])
		if m == nil {
			t.Fatalf("docs/DESIGN.md:%d: the folder cell %q names no `folder/`", n, cells[0])
		}
		r := layoutRow{folder: strings.TrimSuffix(m[1], "/"), all: strings.TrimSpace(cells[3]) == "all"}
		for _, m := range backticked.FindAllStringSubmatch(cells[3], -1) {
			switch name := m[1]; {
			case !modulePackageName.MatchString(name):
			case strings.HasSuffix(name, "/*"):
				r.subtree = append(r.subtree, strings.TrimSuffix(name, "/*"))
			default:
				r.exact = append(r.exact, name)
			}
		}
		rows[r.folder] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 10 {
		t.Fatalf("docs/DESIGN.md: found %d rows under \"## Layout and the real arrows\"; did the heading or the table change?", len(rows))
	}
	return rows
}

// layoutPackage is one package of the module with the module's packages
// its non-test files import, both relative to the module ("api/wire").
type layoutPackage struct {
	rel     string
	imports []string
}

// modulePackages lists the module's packages (go list ./...).
func modulePackages(t *testing.T) []layoutPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	rel := func(p string) (string, bool) {
		r, ok := strings.CutPrefix(p, modulePath+"/")
		return r, ok
	}
	var pkgs []layoutPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		lp := layoutPackage{}
		var ok bool
		if lp.rel, ok = rel(p.ImportPath); !ok {
			continue
		}
		for _, imp := range p.Imports {
			if r, ok := rel(imp); ok {
				lp.imports = append(lp.imports, r)
			}
		}
		pkgs = append(pkgs, lp)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages of %s", len(pkgs), modulePath)
	}
	return pkgs
}
