package worker_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

func TestJobProcess(t *testing.T) {
	setup := workerOnFakeServer
	finalFailure := func(t *testing.T, rep report, mentions ...string) {
		t.Helper()
		if rep.Kind != "fail" || rep.Req.Retry == nil || *rep.Req.Retry {
			t.Fatalf("report = %+v, want a failure without retry", rep)
		}
		for _, m := range mentions {
			if !strings.Contains(rep.Req.Error, m) {
				t.Fatalf("error %q does not mention %q", rep.Req.Error, m)
			}
		}
	}

	t.Run("CommandsGetNoneOfTheWorkersOtherVariables", func(t *testing.T) {
		t.Setenv("WORKRON_TOKEN", "the-workers-token")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "a-secret")
		t.Setenv("TZ", "Europe/Paris")
		f := setup(t, nil)
		id := f.add(wire.Job{Command: "env", Env: map[string]string{"GREETING": "hi"}})
		rep := f.waitReport(t, id)
		if rep.Kind != "done" {
			t.Fatalf("report = %+v, want done", rep)
		}
		got := map[string]string{}
		for line := range strings.Lines(rep.Req.Output) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
			got[k] = v
		}
		for _, k := range []string{"WORKRON_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
			if _, ok := got[k]; ok {
				t.Errorf("the command got the worker's %s", k)
			}
		}
		want := map[string]string{"GREETING": "hi", "WORKRON_JOB_ID": id, "WORKRON_ATTEMPT": "1",
			"TZ": "Europe/Paris", "PATH": os.Getenv("PATH")}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
	})

	t.Run("PassEnvAddsTheWorkersOwnValues", func(t *testing.T) {
		t.Setenv("LD_LIBRARY_PATH", "/opt/lib")
		t.Setenv("CUDA_VISIBLE_DEVICES", "1")
		f := setup(t, func(c *worker.Config) { c.PassEnv = []string{"LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "UNSET_ONE"} })
		id := f.add(wire.Job{Command: `echo "$LD_LIBRARY_PATH $CUDA_VISIBLE_DEVICES ${UNSET_ONE-unset}"`})
		if rep := f.waitReport(t, id); rep.Req.Output != "/opt/lib 1 unset\n" {
			t.Fatalf("output = %q, want the worker's values", rep.Req.Output)
		}
	})

	t.Run("PassEnvRefusesTheToken", func(t *testing.T) {
		cfg := testConfig(t, "http://127.0.0.1:1")
		cfg.PassEnv = []string{"PATH", "WORKRON_TOKEN"}
		if _, err := worker.New(cfg); err == nil || !strings.Contains(err.Error(), "PassEnv[1]") {
			t.Fatalf("New = %v, want an error naming PassEnv[1]", err)
		}
	})

	t.Run("ALoaderVariableInAJobFailsItForGood", func(t *testing.T) {
		// The server refuses them at submit; an older release did not.
		f := setup(t, nil)
		id := f.add(wire.Job{Command: "true", Env: map[string]string{"LD_PRELOAD": "/tmp/evil.so"}})
		finalFailure(t, f.waitReport(t, id), "LD_PRELOAD")
	})

	t.Run("AllowListRunsTheProgramWithoutAShell", func(t *testing.T) {
		f := setup(t, func(c *worker.Config) { c.AllowCommands = []string{"echo", "/bin/sh"} })
		id := f.add(wire.Job{Command: `echo 'a;b $HOME' "c d"x  e`})
		if rep := f.waitReport(t, id); rep.Kind != "done" || rep.Req.Output != "a;b $HOME c dx e\n" {
			t.Fatalf("report = %+v, want done with the words as they were quoted", rep)
		}
	})

	t.Run("AllowListRefusesShellSyntaxForGood", func(t *testing.T) {
		f := setup(t, func(c *worker.Config) { c.AllowCommands = []string{"echo"} })
		id := f.add(wire.Job{Command: "echo hi; id"})
		finalFailure(t, f.waitReport(t, id), "command refused", `';'`)
		id = f.add(wire.Job{Command: `echo "$WORKRON_JOB_ID"`})
		finalFailure(t, f.waitReport(t, id), "command refused", "double quotes")
	})

	t.Run("AllowListRefusesOtherProgramsForGood", func(t *testing.T) {
		f := setup(t, func(c *worker.Config) { c.AllowCommands = []string{"echo"} })
		id := f.add(wire.Job{Command: "id -u"})
		finalFailure(t, f.waitReport(t, id), "command refused", `"id"`, "echo")
		id = f.add(wire.Job{Command: "/bin/echo hi"})
		finalFailure(t, f.waitReport(t, id), `"/bin/echo"`)
	})

	t.Run("AllowListNamesMustBeFound", func(t *testing.T) {
		cfg := testConfig(t, "http://127.0.0.1:1")
		for _, bad := range []string{"no-such-program-here", "./echo", "echo hi", ""} {
			cfg.AllowCommands = []string{bad}
			if _, err := worker.New(cfg); err == nil || !strings.Contains(err.Error(), "AllowCommands[0]") {
				t.Errorf("AllowCommands %q: New = %v, want an error naming AllowCommands[0]", bad, err)
			}
		}
	})

	t.Run("RunAsRunsCommandsAsThatUser", func(t *testing.T) {
		nobody := runAsUser(t)
		secret := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(secret, []byte("the-workers-token"), 0o600); err != nil {
			t.Fatal(err)
		}
		f := setup(t, func(c *worker.Config) { c.RunAs = nobody.Username })
		id := f.add(wire.Job{Command: `id -u; echo "$HOME $USER"; pwd; cat ` + secret + ` || echo refused`})
		rep := f.waitReport(t, id)
		dir := nobody.HomeDir
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			dir = "/"
		}
		want := nobody.Uid + "\n" + nobody.HomeDir + " " + nobody.Username + "\n" + dir + "\n"
		if rep.Kind != "done" || !strings.HasPrefix(rep.Req.Output, want) || !strings.HasSuffix(rep.Req.Output, "refused\n") ||
			strings.Contains(rep.Req.Output, "the-workers-token") {
			t.Fatalf("report = %+v, want done, output %q, then the worker's file refused", rep, want+"...refused\n")
		}
	})

	t.Run("RunAsGangTaskMayWriteItsCheckpointButNotReplaceIt", func(t *testing.T) {
		runAsUser(t)
		f := setup(t, func(c *worker.Config) { c.RunAs = "nobody" })
		id := f.add(wire.Job{GangID: "gang-1", Command: `printf step > "$WORKRON_CHECKPOINT" && echo wrote; ` +
			`ln -sf /etc/shadow "$WORKRON_CHECKPOINT" 2>/dev/null || echo kept; ls "$(dirname "$WORKRON_CHECKPOINT")" 2>/dev/null || echo unlisted`})
		if rep := f.waitReport(t, id); rep.Req.Output != "wrote\nkept\nunlisted\n" {
			t.Fatalf("output = %q, want the file written, kept and its directory unlisted", rep.Req.Output)
		}
	})

	t.Run("RunAsTakesANumericUID", func(t *testing.T) {
		nobody := runAsUser(t)
		f := setup(t, func(c *worker.Config) { c.RunAs = nobody.Uid })
		id := f.add(wire.Job{Command: "id -u"})
		if rep := f.waitReport(t, id); rep.Req.Output != nobody.Uid+"\n" {
			t.Fatalf("output = %q, want %s", rep.Req.Output, nobody.Uid)
		}
	})

	t.Run("RunAsUnknownUserIsRefused", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		cfg := testConfig(t, "http://127.0.0.1:1")
		cfg.RunAs = "no-such-user-here"
		if _, err := worker.New(cfg); err == nil || !strings.Contains(err.Error(), "RunAs") {
			t.Fatalf("New = %v, want an error naming RunAs", err)
		}
	})
}

// runAsUser returns the user nobody, skipping the test when the process is
// not root or there is no such user.
func runAsUser(t *testing.T) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("RunAs needs the test to run as root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	return u
}
