"""Shell-command jobs on the Python worker (Worker(shell=True)), with the Go
worker's contract (docs/workers.md; docs/scheduling.md, "Progress and results", "Resources
and gangs"): ``sh -c COMMAND`` in a process group of its own, a clean
environment, the output's last bytes and the exit code, progress lines, a
result file, exit 75 for a rate limit, a step socket for ``workron step``
(stepsocket.py), and a stop that sends SIGTERM to the
group, waits the kill grace, then sends SIGKILL. A job watcher kills the
groups still running when the worker exits, even by SIGKILL.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .client import MAX_PROGRESS_MESSAGE, MAX_RESULT_BYTES, Duration, go_duration, parse_go_duration
from .durable import Journal
from .gang import read_regular
from .stepsocket import STEP_SOCKET_ENV, StepSocket

# The worker's variables every command gets, when the worker has them;
# pass_env adds more. Nothing else of the worker's environment (its token
# above all) reaches a job.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR")
TOKEN_ENV = "WORKRON_TOKEN"

PROGRESS_LINE = "::workron-progress "
RESULT_FILE_ENV = "WORKRON_RESULT_FILE"
PARENT_RESULTS_ENV = "WORKRON_PARENT_RESULTS"
PARENT_RESULTS_FILE_ENV = "WORKRON_PARENT_RESULTS_FILE"
EXIT_RATE_LIMITED = 75
RETRY_AFTER_LINE = "WORKRON_RETRY_AFTER="
SNOOZE_LINE = "WORKRON_SNOOZE="

# How long output is read after the command's group is gone: only a process
# that left the group can hold the pipe open that long.
_OUTPUT_DRAIN = 2.0
_MAX_PROGRESS_LINE = 4096

# The job watcher: reads "+ PGID" and "- PGID" lines from a pipe only the
# worker writes to; when the pipe ends (the worker exited in any way) it
# kills every group still listed. The Go worker's, word for word.
_WATCHER = """trap '' HUP INT TERM
l=' '
while read -r op g; do
	case $op in
	+) l="$l$g " ;;
	-) case $l in *" $g "*) l="${l%% $g *} ${l#* $g }" ;; esac ;;
	esac
done
for g in $l; do kill -9 -"$g"; done"""


def check_pass_env(names: Sequence[str]) -> List[str]:
    """Returns names, or raises ValueError naming the one refused."""
    for i, n in enumerate(names):
        if not n or "=" in n or "\x00" in n:
            raise ValueError(f"pass_env[{i}]: must be a variable name without '=' or NUL, got {n!r}")
        if n == TOKEN_ENV:
            raise ValueError(f"pass_env[{i}]: {n} is the worker's credential; jobs must never get it")
    return list(names)


class Watcher:
    """The worker's side of the job watcher; safe for concurrent use."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = subprocess.Popen(
            ["sh", "-c", _WATCHER], stdin=subprocess.PIPE, env={}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def add(self, pgid: int) -> None:
        self._send(f"+ {pgid}\n")

    def remove(self, pgid: int) -> None:
        self._send(f"- {pgid}\n")

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._proc.stdin is None or self._proc.stdin.closed:
                return
            try:
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
            except OSError as e:
                self._log.error("the job watcher is gone: jobs will not die with this worker: %s", e)
                self._proc.stdin.close()

    def stop(self) -> None:
        """Closes the pipe (the watcher kills what is still listed) and reaps it."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            proc.wait()


class _Output:
    """The last bytes of a command's combined output, and its progress lines."""

    def __init__(self, limit: int, on_progress: Callable[[int, str], None]) -> None:
        self._limit = limit
        self._tail = bytearray()
        self._line = bytearray()
        self._long = False
        self._on_progress = on_progress
        self._lock = threading.Lock()

    def write(self, chunk: bytes) -> None:
        with self._lock:
            self._tail += chunk
            if len(self._tail) > self._limit:
                del self._tail[:len(self._tail) - self._limit]
        rest = chunk
        while rest:
            i = rest.find(b"\n")
            part = rest if i < 0 else rest[:i]
            if not self._long:
                if len(self._line) + len(part) > _MAX_PROGRESS_LINE:
                    self._long, self._line = True, bytearray()
                else:
                    self._line += part
            if i < 0:
                break
            if not self._long:
                self._parse(bytes(self._line))
            self._line, self._long = bytearray(), False
            rest = rest[i + 1:]

    def _parse(self, line: bytes) -> None:
        s = line.decode("utf-8", "replace").rstrip("\r")
        if not s.startswith(PROGRESS_LINE):
            return
        num, _, msg = s[len(PROGRESS_LINE):].lstrip(" ").partition(" ")
        try:
            pct = int(num[:-1] if num.endswith("%") else num)
        except ValueError:
            return
        self._on_progress(pct, msg.strip()[:MAX_PROGRESS_MESSAGE])

    def text(self) -> str:
        with self._lock:
            return self._tail.decode("utf-8", "replace")


@dataclass
class Outcome:
    """How a command ended: the report's fields, status "done" or "failed"."""

    status: str
    exit_code: Optional[int] = None
    output: str = ""
    error: str = ""
    result: Any = None
    hold: Dict[str, str] = field(default_factory=dict)


@dataclass
class Command:
    """One shell job's process while it runs. ``started`` is called with the
    process once it runs (under no lock), so that a stop may reach it."""

    command: str
    env: Dict[str, str]
    parent_results: Dict[str, Any]
    output_tail: int
    on_progress: Callable[[int, str], None]
    watcher: Optional[Watcher]
    started: Callable[[subprocess.Popen], None]
    # The job's journal: its step socket serves it (stepsocket.py). None:
    # no socket, and `workron step` in the job says so.
    journal: Optional[Journal] = None
    log: Optional[logging.Logger] = None
    _dir: str = ""

    def run(self) -> Outcome:
        """Runs the command to its end and returns how it ended (a failure
        to start it included)."""
        self._dir = tempfile.mkdtemp(prefix="workron-job-")
        steps = self._open_steps()
        try:
            return self._run(steps)
        finally:
            if steps is not None:
                steps.close()
            shutil.rmtree(self._dir, ignore_errors=True)

    def _open_steps(self) -> Optional[StepSocket]:
        """The job's step socket; None (logged) when there is no journal or
        it cannot be opened: the job runs without one."""
        if self.journal is None:
            return None
        try:
            return StepSocket(self.journal, log=self.log)
        except OSError as e:
            if self.log is not None:
                self.log.warning("no step socket for the job: %s", e)
            return None

    def _run(self, steps: Optional[StepSocket]) -> Outcome:
        env = dict(self.env)
        if steps is not None:
            env[STEP_SOCKET_ENV] = steps.path
        result_file = os.path.join(self._dir, "result.json")
        env[RESULT_FILE_ENV] = result_file
        if self.parent_results:
            data = json.dumps(self.parent_results, separators=(",", ":"))
            if len(data.encode()) <= MAX_RESULT_BYTES:
                env[PARENT_RESULTS_ENV] = data
            else:
                path = os.path.join(self._dir, "parent-results.json")
                with open(path, "w") as f:
                    f.write(data)
                env[PARENT_RESULTS_FILE_ENV] = path
        out = _Output(self.output_tail, self.on_progress)
        try:
            proc = subprocess.Popen(["sh", "-c", self.command], env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except (OSError, ValueError) as e:
            return Outcome("failed", error=f"start sh: {e}")
        pgid = proc.pid
        if self.watcher is not None:
            self.watcher.add(pgid)
        reader = threading.Thread(target=_copy, args=(proc, out), name=f"workron-output-{pgid}", daemon=True)
        reader.start()
        self.started(proc)
        code = proc.wait()
        kill_group(pgid, signal.SIGKILL)  # what the command left in its group goes with it
        if self.watcher is not None:
            self.watcher.remove(pgid)
        reader.join(_OUTPUT_DRAIN)
        return self._outcome(code, out.text(), result_file)

    def _outcome(self, code: int, output: str, result_file: str) -> Outcome:
        if code < 0:
            sig = -code
            name = signal.strsignal(sig) if hasattr(signal, "strsignal") else ""
            return Outcome("failed", 128 + sig, output, f"killed by signal {sig} ({name})")
        if code == EXIT_RATE_LIMITED:
            error, hold = _hold_off(code, output)
            return Outcome("failed", code, output, error, hold=hold)
        if code != 0:
            return Outcome("failed", code, output, f"exit status {code}")
        try:
            data = read_regular(result_file, MAX_RESULT_BYTES)
        except FileNotFoundError:
            return Outcome("done", code, output)
        except OSError as e:
            return Outcome("failed", code, output, f"{RESULT_FILE_ENV}: {e}")
        if data is None:
            return Outcome("failed", code, output, f"{RESULT_FILE_ENV}: a result is at most {MAX_RESULT_BYTES} bytes")
        if not data.strip():
            return Outcome("done", code, output)
        try:
            return Outcome("done", code, output, result=json.loads(data))
        except ValueError:
            return Outcome("failed", code, output, f"{RESULT_FILE_ENV}: the job wrote a result that is not JSON")


def _copy(proc: subprocess.Popen, out: _Output) -> None:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            out.write(chunk)
    except OSError:
        return
    finally:
        proc.stdout.close()


def _hold_off(code: int, output: str) -> Tuple[str, Dict[str, str]]:
    """The error and report fields of a command that exited 75: rate
    limited (for its output's last WORKRON_RETRY_AFTER=) or snoozed
    (WORKRON_SNOOZE=). Without either line it is an ordinary failure, as
    the Go worker has it: a tool that exits 75 on its own neither pauses
    anything nor escapes max_attempts."""
    for line in reversed(output.split("\n")):
        line = line.strip()
        for prefix, key in ((RETRY_AFTER_LINE, "rate_limited_for"), (SNOOZE_LINE, "snooze_for")):
            if line.startswith(prefix):
                try:
                    if parse_go_duration(line[len(prefix):]) is None:
                        continue
                except ValueError:
                    continue
                d = bound_hold_off(line[len(prefix):])
                what = "rate limited" if key == "rate_limited_for" else "snoozed"
                return f"exit status {code}: {what} for {d}", {key: d}
    return f"exit status {code}", {}


# What a rate-limited or snoozed attempt may ask for, as the server takes it.
_MIN_HOLD_OFF, _MAX_HOLD_OFF = 0.001, 24 * 3600.0


def bound_hold_off(after: Duration) -> str:
    """after (seconds, a timedelta or a Go duration) as the Go duration a
    report takes, held to 1ms..24h."""
    secs = parse_go_duration(after) if isinstance(after, str) else after
    if hasattr(secs, "total_seconds"):
        secs = secs.total_seconds()
    return go_duration(min(max(float(secs or 0), _MIN_HOLD_OFF), _MAX_HOLD_OFF)) or "1ms"


def kill_group(pgid: int, sig: int) -> None:
    """Sends sig to the process group pgid, which may be gone already."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def command_env(job_env: Dict[str, str], names: Sequence[str], job_id: str, attempt: int,
                traceparent: str) -> Dict[str, str]:
    """A command's environment: the worker's variables of names (BASE_ENV
    and pass_env) it has, the job's env, then WORKRON_JOB_ID,
    WORKRON_ATTEMPT and, when the job has a trace, TRACEPARENT, later
    entries winning."""
    env = {n: os.environ[n] for n in names if n in os.environ}
    for k in sorted(job_env):
        env[k] = job_env[k]
    env["WORKRON_JOB_ID"] = job_id
    env["WORKRON_ATTEMPT"] = str(attempt)
    if traceparent:
        env["TRACEPARENT"] = traceparent
    return env
