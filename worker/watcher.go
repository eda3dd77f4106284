package worker

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// watcherScript is the job watcher: a small sh that Run starts, which reads
// lines "+ PGID" (a job's process group began) and "- PGID" (it is gone)
// from a pipe only the worker can write to, and keeps the list. When the
// pipe ends, because Run closed it or because the worker exited in any way,
// SIGKILL included, it kills every group still listed. It ignores the
// signals that stop a worker gracefully. Builtins only: no fork per line.
const watcherScript = `trap '' HUP INT TERM
l=' '
while read -r op g; do
	case $op in
	+) l="$l$g " ;;
	-) case $l in *" $g "*) l="${l%% $g *} ${l#* $g }" ;; esac ;;
	esac
done
for g in $l; do kill -9 -"$g"; done`

// watcher is the worker's side of the job watcher. Its methods are safe
// for concurrent use, and do nothing on a nil watcher.
type watcher struct {
	log *slog.Logger
	cmd *exec.Cmd

	mu   sync.Mutex
	pipe *os.File // the write end; nil once closed or broken
}

// startWatcher starts the job watcher, as the worker's own user so that no
// job can signal it, in a process group of its own.
func startWatcher(log *slog.Logger) (*watcher, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("worker: job watcher pipe: %w", err)
	}
	cmd := exec.Command("sh", "-c", watcherScript)
	cmd.Env = []string{} // not nil: nil would mean the worker's environment
	cmd.Stdin = pr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = pr.Close() // the watcher holds its own copy; the pipe's write end is close-on-exec
	if err != nil {
		_ = pw.Close()
		return nil, fmt.Errorf("worker: start the job watcher: %w", err)
	}
	return &watcher{log: log, cmd: cmd, pipe: pw}, nil
}

// add tells the watcher that process group pgid began.
func (wt *watcher) add(pgid int) { wt.send('+', pgid) }

// remove tells the watcher that process group pgid is gone.
func (wt *watcher) remove(pgid int) { wt.send('-', pgid) }

func (wt *watcher) send(op byte, pgid int) {
	if wt == nil {
		return
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.pipe == nil {
		return
	}
	line := append([]byte{op, ' '}, strconv.Itoa(pgid)+"\n"...)
	if _, err := wt.pipe.Write(line); err != nil {
		wt.log.Error("the job watcher is gone: jobs will not die with this worker", "err", err)
		_ = wt.pipe.Close()
		wt.pipe = nil
	}
}

// stop closes the pipe, so the watcher kills what is still listed and
// exits, and reaps it.
func (wt *watcher) stop() {
	if wt == nil {
		return
	}
	wt.mu.Lock()
	if wt.pipe != nil {
		_ = wt.pipe.Close()
		wt.pipe = nil
	}
	wt.mu.Unlock()
	_ = wt.cmd.Wait()
}
