package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's top, seen from this package.
const repoRoot = "../.."

// TestDocs checks the Markdown of the repository (README.md, docs/, the
// Python client's README): every relative link names a file that exists, an
// anchor names a heading of that file (GitHub's slugs), and every workron
// flag a document names (`--flag` in backticks, or a flag on a `workron ...`
// command line in a code span or block) is a flag of some workron command.
// Docs that point at a section that moved, or at a flag that was renamed,
// fail here instead of in a reader's hands.
func TestDocs(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 3 {
		t.Fatalf("found only %v; is the test run from cmd/workron?", files)
	}
	docs := map[string]*mdDoc{}
	for _, f := range files {
		docs[f] = parseMarkdown(t, f)
	}
	flags := workronFlags(t)
	for _, f := range files {
		d := docs[f]
		rel, _ := filepath.Rel(repoRoot, f)
		for _, l := range d.links {
			if err := checkLink(f, l.target, docs); err != "" {
				t.Errorf("%s:%d: link %q: %s", rel, l.line, l.target, err)
			}
		}
		for _, fl := range d.flags {
			if !flags[fl.name] && docFlagExceptions[fl.name] == "" {
				t.Errorf("%s:%d: --%s is no flag of any workron command (in %q)", rel, fl.line, fl.name, fl.context)
			}
		}
	}
}

// docFlagExceptions are double-dash options the docs name that belong to
// other programs, each with the program it belongs to.
var docFlagExceptions = map[string]string{
	"check":                "scripts/release --check (the release script's short mode)",
	"allow-dirty":          "scripts/release --allow-dirty",
	"river-fetch-cooldown": "scripts/peers (the River and asynq comparison)",
	"asynq-check-interval": "scripts/peers (the River and asynq comparison)",
	"seed":                 "scripts/chaos (internal/tools/chaos)",
	"faults":               "scripts/chaos (internal/tools/chaos)",
	"nodes":                "scripts/chaos (internal/tools/chaos)",
	"no-netns":             "scripts/chaos (internal/tools/chaos)",
}

type mdLink struct {
	line   int
	target string
}

type mdFlag struct {
	line    int
	name    string
	context string
}

type mdDoc struct {
	anchors map[string]bool
	links   []mdLink
	flags   []mdFlag
}

// markdownFiles lists the repository's Markdown files, leaving out
// vendored and generated trees.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "third_party", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

var (
	fenceRE    = regexp.MustCompile("^\\s*(```|~~~)")
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkRE     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLinkRE  = regexp.MustCompile(`^\s*\[[^\]]+\]:\s+(\S+)`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeSpanRE = regexp.MustCompile("`+[^`]+`+")
	// A workron command line: the binary as the docs spell it, then a verb.
	commandRE  = regexp.MustCompile(`(?:^|[\s(])(?:bin/workron|\./workron|workron|go run \./cmd/workron)\s+[a-z]`)
	flagRE     = regexp.MustCompile(`(?:^|[\s\[(|=])--([a-z][a-z0-9-]*)`)
	usageRE    = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)
	linkTextRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// parseMarkdown reads one file's headings (as GitHub's anchors), relative
// links and the workron flags it names.
func parseMarkdown(t *testing.T, path string) *mdDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			if commandRE.MatchString(line) {
				d.addCommandFlags(n, line)
			}
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			if k := seen[s]; k > 0 {
				d.anchors[s+"-"+strconv.Itoa(k)] = true
			} else {
				d.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		// Links and flags outside code spans; flags inside them.
		plain := codeSpanRE.ReplaceAllString(line, "``")
		for _, m := range linkRE.FindAllStringSubmatch(plain, -1) {
			d.links = append(d.links, mdLink{n, m[1]})
		}
		if m := refLinkRE.FindStringSubmatch(plain); m != nil {
			d.links = append(d.links, mdLink{n, m[1]})
		}
		for _, span := range codeSpanRE.FindAllString(line, -1) {
			code := strings.Trim(span, "`")
			switch {
			case strings.HasPrefix(code, "--") && len(code) > 2:
				d.addFlags(n, code, code)
			case commandRE.MatchString(code):
				d.addCommandFlags(n, code)
			}
		}
	}
	return d
}

// addCommandFlags adds the flags of a workron command line, up to a "--"
// that ends them (what follows is the job's command) or a comment.
func (d *mdDoc) addCommandFlags(n int, line string) {
	loc := commandRE.FindStringIndex(line)
	cmd := line[loc[0]:]
	if i := strings.Index(cmd, " -- "); i >= 0 {
		cmd = cmd[:i]
	}
	cmd = strings.TrimSuffix(cmd, " --")
	if i := strings.Index(cmd, " #"); i >= 0 {
		cmd = cmd[:i]
	}
	// Another program in a pipeline or a list takes its own flags.
	for _, sep := range []string{" | ", " && ", " || ", "; "} {
		if i := strings.Index(cmd, sep); i >= 0 {
			cmd = cmd[:i]
		}
	}
	d.addFlags(n, cmd, line)
}

func (d *mdDoc) addFlags(n int, code, context string) {
	for _, m := range flagRE.FindAllStringSubmatch(code, -1) {
		d.flags = append(d.flags, mdFlag{n, m[1], context})
	}
}

// slug is GitHub's anchor for a heading: the text as rendered, lowercased,
// without punctuation but '-' and '_', spaces turned into '-'.
func slug(heading string) string {
	heading = linkTextRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLink says what is wrong with a link of the file from, or "".
func checkLink(from, target string, docs map[string]*mdDoc) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), path)
		if strings.HasPrefix(path, "/") {
			return "an absolute path; use one relative to the file"
		}
		if _, err := os.Stat(file); err != nil {
			return "no such file"
		}
	}
	if anchor == "" {
		return ""
	}
	d, ok := docs[file]
	if !ok {
		if !strings.HasSuffix(file, ".md") {
			return "an anchor into a file that is not Markdown"
		}
		return "an anchor into a Markdown file the check does not read"
	}
	if !d.anchors[anchor] {
		return "no heading of " + filepath.Base(file) + " has anchor #" + anchor
	}
	return ""
}

// docCommands are the workron command lines whose flags the docs may name;
// each is run with -h, and its usage lists its flags.
var docCommands = [][]string{
	{"server"}, {"worker"}, {"dev"}, {"bench"}, {"version"},
	{"submit"}, {"jobs", "ls"}, {"jobs", "get"}, {"jobs", "cancel"}, {"jobs", "retry"}, {"jobs", "wait"},
	{"gangs", "get"}, {"workers"}, {"digest"},
	{"queues"}, {"queues", "get"}, {"queues", "pause"}, {"queues", "resume"}, {"queues", "limit"},
	{"queues", "pauses"}, {"queues", "lift"},
	{"schedules", "ls"}, {"schedules", "get"}, {"schedules", "create"}, {"schedules", "update"},
	{"schedules", "delete"}, {"schedules", "pause"}, {"schedules", "resume"}, {"schedules", "trigger"},
	{"cluster", "status"}, {"cluster", "health"}, {"cluster", "join"}, {"cluster", "remove"},
	{"backup"}, {"restore"}, {"tls", "ca"}, {"tls", "node"}, {"tls", "client"},
}

// workronFlags is every flag of every command in docCommands.
func workronFlags(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a command that went past its flags would stop at once
	flags := map[string]bool{}
	for _, argv := range docCommands {
		var out bytes.Buffer
		_ = run(ctx, append(append([]string{}, argv...), "-h"), &out, &out)
		ms := usageRE.FindAllStringSubmatch(out.String(), -1)
		if len(ms) == 0 {
			t.Fatalf("workron %s -h lists no flags:\n%s", strings.Join(argv, " "), out.String())
		}
		for _, m := range ms {
			flags[m[1]] = true
		}
	}
	return flags
}

// TestREADMETestCommand keeps CI running the test command the README gives a
// newcomer: every word of the README's `go test` line is in .ci/run's.
func TestREADMETestCommand(t *testing.T) {
	readme := goTestLines(t, filepath.Join(repoRoot, "README.md"))
	ci := goTestLines(t, filepath.Join(repoRoot, ".ci", "run"))
	if len(readme) != 1 {
		t.Fatalf("README.md gives %d go test commands (%q), want one", len(readme), readme)
	}
	for _, line := range ci {
		if containsAll(strings.Fields(line), strings.Fields(readme[0])) {
			return
		}
	}
	t.Errorf(".ci/run runs no go test with every word of the README's %q: %q", readme[0], ci)
}

// goTestLines are a file's lines that start with `go test `.
func goTestLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "go test ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func containsAll(have, want []string) bool {
	set := map[string]bool{}
	for _, w := range have {
		set[w] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}
