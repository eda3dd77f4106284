package main

import (
	"bufio"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitsDir holds the example systemd units and their environment files.
const unitsDir = "../../examples/systemd"

// credentialsDir stands for %d, the unit's credentials directory.
const credentialsDir = "/run/credentials/unit"

// TestSystemdUnits keeps examples/systemd in step with the binary: each
// unit's ExecStart, with its example environment file filled in, must parse
// with the flags of the verb it runs (no unknown flag, no bad value, no
// stray argument), use no variable the file leaves unset, read only
// credentials it loads, and keep --data where ProtectSystem=strict lets it
// write. A worker unit must stop the
// worker alone (KillMode=mixed) and wait longer than --grace + --kill-grace.
// CI runs systemd-analyze verify on the same files for the directives.
func TestSystemdUnits(t *testing.T) {
	units, err := filepath.Glob(filepath.Join(unitsDir, "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in %s (%v)", unitsDir, err)
	}
	verbs := map[string]bool{}
	for _, path := range units {
		t.Run(filepath.Base(path), func(t *testing.T) {
			u := readUnit(t, path)
			envFile := strings.TrimPrefix(u.one(t, "EnvironmentFile"), "-")
			env := readEnvFile(t, filepath.Join(unitsDir, filepath.Base(envFile)))
			argv := expandExec(t, u.one(t, "ExecStart"), env)
			if len(argv) < 2 || argv[0] != "/usr/local/bin/workron" {
				t.Fatalf("ExecStart runs %q, not /usr/local/bin/workron VERB", argv)
			}
			verb := argv[1]
			verbs[verb] = true
			fs := flag.NewFlagSet(verb, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var worker workerFlags
			switch verb {
			case "server":
				var f serverFlags
				f.register(fs)
			case "worker":
				worker.register(fs)
			default:
				t.Fatalf("ExecStart runs workron %s; the test knows server and worker", verb)
			}
			if err := fs.Parse(argv[2:]); err != nil {
				t.Fatalf("workron %s does not take ExecStart's arguments %q: %v", verb, argv[2:], err)
			}
			if fs.NArg() > 0 {
				t.Fatalf("ExecStart leaves arguments %q that are no flag's", fs.Args())
			}
			u.checkCredentials(t, argv)
			if data := fs.Lookup("data"); data != nil {
				u.checkWritable(t, data.Value.String())
			}
			if verb == "worker" {
				checkWorkerStop(t, u, worker)
			}
		})
	}
	if t.Failed() {
		return // a unit that failed to parse has no verb to count
	}
	for _, v := range []string{"server", "worker"} {
		if !verbs[v] {
			t.Errorf("no unit in %s runs workron %s", unitsDir, v)
		}
	}
}

// unit is a systemd unit file's [Service] section: each key's values in
// order (a key may repeat).
type unit map[string][]string

// readUnit reads the [Service] section of a unit file, joining lines that
// end in a backslash and dropping comments.
func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section, pending := unit{}, "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no KEY=VALUE line", path, line)
		}
		if section == "[Service]" {
			u[key] = append(u[key], value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// one is the value of a key that must be given exactly once.
func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("[Service] has %d %s lines, want 1", len(u[key]), key)
	}
	return u[key][0]
}

// checkCredentials fails unless every %d/NAME in ExecStart is loaded by a
// LoadCredential=NAME:PATH line.
func (u unit) checkCredentials(t *testing.T, argv []string) {
	t.Helper()
	loaded := map[string]bool{}
	for _, c := range u["LoadCredential"] {
		name, _, _ := strings.Cut(c, ":")
		loaded[name] = true
	}
	for _, a := range argv {
		if name, ok := strings.CutPrefix(a, credentialsDir+"/"); ok && !loaded[name] {
			t.Errorf("ExecStart reads credential %s, which no LoadCredential= loads", name)
		}
	}
}

// checkWritable fails unless dir is under the unit's StateDirectory or a
// ReadWritePaths entry, the only places ProtectSystem=strict leaves
// writable.
func (u unit) checkWritable(t *testing.T, dir string) {
	t.Helper()
	if u.one(t, "ProtectSystem") != "strict" {
		return
	}
	var writable []string
	for _, s := range u["StateDirectory"] {
		for _, d := range strings.Fields(s) {
			writable = append(writable, "/var/lib/"+d)
		}
	}
	for _, s := range u["ReadWritePaths"] {
		for _, p := range strings.Fields(s) {
			writable = append(writable, strings.TrimLeft(p, "-+"))
		}
	}
	for _, w := range writable {
		if dir == w || strings.HasPrefix(dir, w+"/") {
			return
		}
	}
	t.Errorf("--data %s is outside the unit's writable paths %q (ProtectSystem=strict)", dir, writable)
}

// checkWorkerStop checks that stopping the unit lets the worker stop its
// jobs itself: systemd signals only the worker, and waits longer than the
// worker's own grace before it kills what is left.
func checkWorkerStop(t *testing.T, u unit, f workerFlags) {
	t.Helper()
	if got := u.one(t, "KillMode"); got != "mixed" {
		t.Errorf("KillMode=%s: systemd would signal the jobs too; want mixed", got)
	}
	stop := u.one(t, "TimeoutStopSec")
	if _, err := time.ParseDuration(stop); err != nil {
		stop += "s" // a bare number is seconds
	}
	d, err := time.ParseDuration(stop)
	if err != nil {
		t.Fatalf("TimeoutStopSec=%s: %v", u.one(t, "TimeoutStopSec"), err)
	}
	if d <= f.grace+f.killGrace {
		t.Errorf("TimeoutStopSec=%s is not above --grace %s + --kill-grace %s: systemd would kill jobs the worker is still stopping", d, f.grace, f.killGrace)
	}
}

// readEnvFile reads KEY=VALUE lines (comments and blank lines skipped,
// one pair of surrounding quotes removed), as systemd's EnvironmentFile.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the unit's EnvironmentFile has no example: %v", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no KEY=VALUE line", path, line)
		}
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		env[key] = value
	}
	return env
}

// expandExec splits an ExecStart command line as systemd does for the
// forms the example units use: words split on spaces, ${VAR} replaced
// within a word, $VAR as a word replaced by the value's words, %H by a
// host name, %d by credentialsDir and %% by %. A variable the environment lacks fails the test.
func expandExec(t *testing.T, line string, env map[string]string) []string {
	t.Helper()
	lookup := func(name string) string {
		v, ok := env[name]
		if !ok {
			t.Fatalf("ExecStart uses $%s, which the example environment file does not set", name)
		}
		return v
	}
	var argv []string
	for _, w := range strings.Fields(line) {
		if name, ok := strings.CutPrefix(w, "$"); ok && !strings.HasPrefix(name, "{") {
			argv = append(argv, strings.Fields(lookup(name))...)
			continue
		}
		var b strings.Builder
		for rest := w; rest != ""; {
			switch {
			case strings.HasPrefix(rest, "${"):
				end := strings.IndexByte(rest, '}')
				if end < 0 {
					t.Fatalf("ExecStart word %q has an unclosed ${", w)
				}
				b.WriteString(lookup(rest[2:end]))
				rest = rest[end+1:]
			case strings.HasPrefix(rest, "%H"):
				b.WriteString("host1")
				rest = rest[2:]
			case strings.HasPrefix(rest, "%d"):
				b.WriteString(credentialsDir)
				rest = rest[2:]
			case strings.HasPrefix(rest, "%%"):
				b.WriteByte('%')
				rest = rest[2:]
			case rest[0] == '%' || rest[0] == '"' || rest[0] == '\'' || rest[0] == '\\':
				t.Fatalf("ExecStart word %q uses %q, which the test does not expand", w, rest[:1])
			default:
				b.WriteByte(rest[0])
				rest = rest[1:]
			}
		}
		argv = append(argv, b.String())
	}
	return argv
}
