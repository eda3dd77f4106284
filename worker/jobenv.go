package worker

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/traceparent"
)

// baseEnv names the variables of the worker's environment that every
// command gets, when the worker has them. Config.PassEnv adds more; nothing
// else of the worker's environment (its token above all) reaches a job.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// BaseEnv returns the names of the worker's environment variables that
// every command gets (when the worker has them): PATH, HOME, USER, LOGNAME,
// LANG, LC_ALL, TZ and TMPDIR.
func BaseEnv() []string { return slices.Clone(baseEnv) }

// tokenEnv is the variable the CLI reads a token from; PassEnv refuses it.
const tokenEnv = "WORKRON_TOKEN"

// checkPassEnv checks Config.PassEnv.
func checkPassEnv(names []string) error {
	for i, n := range names {
		switch {
		case n == "" || strings.ContainsAny(n, "=\x00"):
			return fmt.Errorf("worker: Config.PassEnv[%d] must be a variable name without '=' or NUL, got %q", i, n)
		case n == tokenEnv:
			return fmt.Errorf("worker: Config.PassEnv[%d]: %s is the worker's credential; jobs must never get it", i, n)
		}
	}
	return nil
}

// workerEnv returns NAME=VALUE for each of names the worker's environment
// has, in order, each name once.
func workerEnv(names []string) []string {
	var env []string
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// jobEnv returns a command's environment: the worker's allowed variables,
// the run-as user's HOME, USER and LOGNAME, the job's env, then
// WORKRON_JOB_ID and WORKRON_ATTEMPT, and TRACEPARENT when the job has a
// trace (the attempt's run span), later entries winning. A job variable
// that wire.CheckEnvVar refuses is an error: the server refuses them at
// submit, so only a job stored by an older release can carry one.
func (w *Worker) jobEnv(job wire.Job) ([]string, error) {
	env := slices.Clone(w.env)
	if id := w.runAs; id != nil {
		env = append(env, "HOME="+id.home, "USER="+id.name, "LOGNAME="+id.name)
	}
	for _, k := range slices.Sorted(maps.Keys(job.Env)) {
		if err := wire.CheckEnvVar("env", k, job.Env[k]); err != nil {
			return nil, err
		}
		env = append(env, k+"="+job.Env[k])
	}
	env = append(env,
		"WORKRON_JOB_ID="+job.ID,
		"WORKRON_ATTEMPT="+strconv.Itoa(job.Attempts),
	)
	if job.TraceParent != "" {
		env = append(env, traceparent.Env+"="+job.TraceParent)
	}
	return env, nil
}

// identity is the user commands run as (Config.RunAs).
type identity struct {
	name string
	home string
	cred *syscall.Credential
}

// errRunAsNeedsRoot is returned by New when Config.RunAs is set and the
// worker does not run as root: only root can start a process as another
// user.
var errRunAsNeedsRoot = errors.New("worker: Config.RunAs needs the worker to run as root")

// lookupRunAs resolves Config.RunAs (a user name or a numeric uid) for a
// worker whose effective uid is euid: its uid, primary gid, supplementary
// groups and home directory. It returns nil for "".
func lookupRunAs(name string, euid int) (*identity, error) {
	if name == "" {
		return nil, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("%w (it runs as uid %d)", errRunAsNeedsRoot, euid)
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if _, perr := strconv.Atoi(name); perr != nil || !errors.As(err, &unknown) {
			return nil, fmt.Errorf("worker: Config.RunAs: %w", err)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("worker: Config.RunAs: %w", err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("worker: Config.RunAs: uid %q of %s: %w", u.Uid, name, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("worker: Config.RunAs: gid %q of %s: %w", u.Gid, name, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	groups, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("worker: Config.RunAs: groups of %s: %w", name, err)
	}
	for _, g := range groups {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("worker: Config.RunAs: group %q of %s: %w", g, name, err)
		}
		if uint32(n) != cred.Gid {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	return &identity{name: u.Username, home: u.HomeDir, cred: cred}, nil
}

// dir is where the user's commands start: their home directory when it
// exists, else "/". The worker's own directory may be closed to them.
func (id *identity) dir() string {
	if fi, err := os.Stat(id.home); err == nil && fi.IsDir() {
		return id.home
	}
	return "/"
}

// handOver lets the run-as user (when there is one) write the checkpoint
// file but not replace it: the file is created if need be and given to
// the user, while its directory stays the worker's, closed to listing.
// Otherwise the user could put a symbolic link to a file only the worker can
// read in its place, and have the worker upload that.
func (w *Worker) handOver(ck *checkpoint) error {
	if w.runAs == nil {
		return nil
	}
	f, err := os.OpenFile(ck.path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", ck.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: %w", ck.path, err)
	}
	if err := os.Chown(ck.path, int(w.runAs.cred.Uid), int(w.runAs.cred.Gid)); err != nil {
		return fmt.Errorf("give %s to %s: %w", ck.path, w.runAs.name, err)
	}
	if err := os.Chmod(ck.dir, 0o711); err != nil {
		return fmt.Errorf("open %s to %s: %w", ck.dir, w.runAs.name, err)
	}
	return nil
}
