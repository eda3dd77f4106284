//go:build linux

package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/proctest"
)

// TestEndToEndJobsDieWithTheirWorker runs the real `workron worker` against
// a node with tokens, the worker's token in its environment as docs/workers.md
// recommends, and gives it a job (submitted with a client token) that
// records its environment and user, starts a background grandchild and
// sleeps. The job must not see the token, must see what --pass-env passes,
// runs as --run-as nobody when the test is root, and when the worker is
// SIGKILLed the job and its grandchild must die too: otherwise, once the
// lease expires, another worker would run the job a second time alongside.
func TestEndToEndJobsDieWithTheirWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts a node and a worker process")
	}
	bin := workronBinary(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("admin "+tokAdmin+" ops\nclient "+tokClient+" ci\nworker "+tokWorker+" fleet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, _ := inProcessNode(t, "--id", "jp1", "--bootstrap", "--http", "127.0.0.1:0", "--raft", "127.0.0.1:0",
		"--data", filepath.Join(t.TempDir(), "jp1"), "--raft-heartbeat-timeout", "100ms", "--raft-election-timeout", "100ms",
		"--auth-token-file", tokens)

	// A directory the job can write to whoever it runs as.
	dir, err := os.MkdirTemp("", "workron-jobproc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	args := []string{"worker", "--server", srv.advertise, "--id", "jp-worker", "--concurrency", "1",
		"--poll-wait", "1s", "--log-level", "debug", "--pass-env", "CUDA_VISIBLE_DEVICES"}
	wantUID, runAs := strconv.Itoa(os.Geteuid()), false
	if nobody, err := user.Lookup("nobody"); err == nil && os.Geteuid() == 0 {
		args = append(args, "--run-as", "nobody")
		wantUID, runAs = nobody.Uid, true
	}
	w := &proc{Name: "jp-worker", Bin: bin, Args: args, Log: filepath.Join(t.TempDir(), "worker.log"),
		Env: []string{"WORKRON_TOKEN=" + tokWorker, "CUDA_VISIBLE_DEVICES=3", "OTHER_SECRET=hush"}}
	if _, err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Kill()
		if t.Failed() {
			t.Logf("worker log:\n%s", w.Tail(60))
		}
	})

	cs := clientSecurity{token: tokClient}
	cl, err := cs.newClient([]string{srv.advertise}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	job, err := cl.Submit(t.Context(), wire.SubmitRequest{Command: fmt.Sprintf(
		"id -u > %[1]s/uid; env > %[1]s/env; cat /proc/$PPID/environ > %[1]s/worker-env 2>/dev/null; sleep 300 & echo $! > %[1]s/grandchild; echo $$ > %[1]s/pid.tmp && mv %[1]s/pid.tmp %[1]s/pid; sleep 300",
		dir)})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	pgid := 0
	t.Cleanup(func() { // whatever this test failed to prove, leave nothing behind
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
	pollUntil(t, 30*time.Second, func() error {
		if _, err := os.Stat(filepath.Join(dir, "pid")); err != nil {
			return fmt.Errorf("job %s has not started: %w", job.ID, err)
		}
		return nil
	})
	for _, name := range []string{"pid", "grandchild"} {
		pids = append(pids, readPid(t, filepath.Join(dir, name)))
	}
	if pgid, err = syscall.Getpgid(pids[0]); err != nil {
		t.Fatal(err)
	}

	env := readFile(t, filepath.Join(dir, "env"))
	for _, leak := range []string{tokWorker, "OTHER_SECRET"} {
		if strings.Contains(env, leak) {
			t.Errorf("the job's environment holds the worker's %s:\n%s", leak, env)
		}
	}
	if !strings.Contains(env, "\nCUDA_VISIBLE_DEVICES=3\n") || !strings.Contains(env, "\nWORKRON_JOB_ID="+job.ID+"\n") {
		t.Errorf("the job's environment lacks --pass-env's variable or its own:\n%s", env)
	}
	if uid := strings.TrimSpace(readFile(t, filepath.Join(dir, "uid"))); uid != wantUID {
		t.Errorf("the job ran as uid %s, want %s", uid, wantUID)
	}
	// Run as another user, the job cannot read the worker's own
	// environment either (as the worker's user it could: docs/security.md says so).
	if runAs {
		if penv := readFile(t, filepath.Join(dir, "worker-env")); strings.Contains(penv, tokWorker) {
			t.Errorf("the job read the worker's token from /proc/<worker pid>/environ")
		}
	}

	w.Kill() // SIGKILL: the worker can clean nothing up itself
	pollUntil(t, 15*time.Second, func() error {
		for _, pid := range pids {
			if !proctest.Gone(pid) {
				return fmt.Errorf("process %d of the job outlived its worker", pid)
			}
		}
		return nil
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return "\n" + string(b)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}
