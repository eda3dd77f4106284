"""The worker runtime: typed handlers for jobs claimed from the cluster.

It follows the protocol of the Go worker (package worker, docs/workers.md):
it registers, long-polls POST /jobs/claim for as many jobs as it has free
slots, numbering each claim (claim_seq); runs each job's handler in a thread
of its own; renews all its leases with one heartbeat per third of the lease
TTL each claim reply announces (lease_ttl_ms), naming the claims that had ended so that a job whose claim reply was
lost goes back at once; and reports every attempt's end with its lease,
carried on the next claim or batched on POST /jobs/reports.

A handler reports progress with ``job.progress(percent, message)``: the
worker sends it at once, in a heartbeat that lists only the jobs with new
progress, or ``progress_interval`` seconds after the last it sent, with the
latest update of every job (at most one such request per interval,
whatever the number of jobs).

While jobs run, the worker also holds one long-poll (POST
/workers/{id}/actions) that the cluster answers as soon as one of its
attempts must stop: a cancel or a gang's drain reaches it at once rather
than at its next heartbeat, whose reply still carries the same actions. What a handler returns is the job's result (any JSON value;
None: none), and ``job.parent_results`` holds the results of the jobs it
depends on.

Each attempt's lease ends, by the worker's clock, one lease TTL after the
arrival of its claim's reply or of the last good heartbeat's reply
(lease.py). When that passes, or a heartbeat is refused with stale_lease or
not_running, or its reply names the lease lost (the cluster did not renew
it), the lease is lost: the cluster may give the job to another
worker, so the worker stops the attempt and never reports it, as the Go
worker does (a report would be refused as stale).

Python cannot kill a thread: when a job times out, is cancelled, or is still
running when the shutdown grace ends, its attempt is reported failed and its
JobContext.stopping event is set; the handler's thread is abandoned, and what
it returns later is ignored. So it is when its lease is lost, unreported, and
with JobContext.lease_lost set too: every call of that JobContext raises
LeaseLost from then on. Handlers that run long should check
``job.stopping``.

With ``shell=True`` it also runs shell-command jobs as the Go worker does
(shell.py): those it can stop (a lost lease too), with SIGTERM to the
command's process group, the kill grace, then SIGKILL. Each gets a step
socket (stepsocket.py), so that ``workron step`` in it is durable.

Durable steps (durable.py): ``job.step``, ``job.sleep``,
``job.wait_for_event``, ``job.invoke``... record through the attempt's
journal. A sleep, wait or invoke that parks the job raises Parked: the
attempt has ended on the server, so the worker frees its slot and sends no
report (also when the handler caught Parked and returned).

Gang tasks (gang.py): ``job.gang`` and ``job.checkpoint`` hold the gang's
env and the checkpoint the task's previous attempt left; every gang task has
a checkpoint file (WORKRON_CHECKPOINT, ``job.save_checkpoint(data)``). When
the gang drains, the heartbeat's "preempt" action stops the task (a command
as above; a handler sees ``job.preempted`` and ``job.stopping`` and has the
kill grace to return), then the worker uploads the checkpoint file if it is
not empty and acknowledges the preemption instead of reporting the attempt.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .client import (MAX_PROGRESS_MESSAGE, MAX_RESULT_BYTES, Abort, Client, Duration, Job, Resources, Spec,
                     WorkronError, _progress_body, parse_go_duration)
from .durable import Journal, Parked, StepBackoff, StepFailed  # noqa: F401 - StepFailed: where it was
from .errors import NoRetry
from .gang import CheckpointFile, Gang
from .lease import Key, LeaseClock, check, named_lost, refused
from .shell import BASE_ENV, Command, Outcome, Watcher, bound_hold_off, check_pass_env, command_env, kill_group
from .tracing import TraceHook, traced

Handler = Callable[["JobContext"], Any]

# How long a worker sends no progress after the cluster refused it (a member
# runs a release without progress, during a rolling upgrade).
_PROGRESS_OFF_FOR = 60.0
# The most attempts the actions loop remembers it was told about without
# running them (a claim reply it never received).
_MAX_UNKNOWN_ACTIONS = 256

# The lease TTL a worker assumes until a claim reply announces the
# server's (lease_ttl_ms), as the Go worker does (worker.defaultLeaseTTL).
_DEFAULT_LEASE_TTL = 15.0

# Report answers whose codes mean nothing was done: the report is sent again.
_RESEND_CODES = ("no_leader", "internal", "outcome_unknown", "upgrade_in_progress")


class RateLimited(Exception):
    """Raised by a handler whose work met a rate limit downstream (an API's
    429): the attempt does not count against max_attempts, the job is
    pending again, and no worker of the cluster claims a job of the same
    concurrency key for ``after`` (seconds, a timedelta or a Go duration;
    1ms to 24h; the server holds it to the queue's max_pause, and a job
    without a key pauses its queue only where the queue allows it, else
    waits alone). ``reason`` is reported as the attempt's error."""

    def __init__(self, after: Duration, reason: str = "") -> None:
        super().__init__(reason or f"rate limited for {after}")
        self.after = after
        self.reason = reason


class Snooze(Exception):
    """Raised by a handler to run its job again ``after`` from now (seconds,
    a timedelta or a Go duration; 1ms to 24h), without using an attempt and
    without pausing anything else."""

    def __init__(self, after: Duration) -> None:
        super().__init__(f"snoozed for {after}")
        self.after = after


@dataclass
class JobContext:
    """The job a handler runs, and ``stopping``: set when the handler
    should return, either because the attempt was already reported failed
    (timeout, cancel, shutdown), because its gang drains (``preempted``
    is set too, and the worker waits the kill grace for the handler), or
    because the worker lost the attempt's lease (``lease_lost`` is set
    too: the attempt is not reported, and every call of this JobContext
    raises LeaseLost from then on)."""

    job: Job
    stopping: threading.Event = field(default_factory=threading.Event)
    stop_reason: str = ""
    # The W3C traceparent the attempt runs in: the job's trace, or the span
    # a trace_hook yielded ("" when the job has no trace). See tracing.py.
    traceparent: str = ""
    # A gang task's gang (None for other jobs), and the checkpoint its
    # previous attempt left (None: none).
    gang: Optional[Gang] = None
    checkpoint: Optional[bytes] = None
    # Set when the task's gang drains: save a checkpoint and return.
    preempted: threading.Event = field(default_factory=threading.Event)
    # Set when the worker lost the attempt's lease (lease.py): stop; nothing
    # more is reported, and the job may run on another worker meanwhile.
    lease_lost: threading.Event = field(default_factory=threading.Event)
    _ckpt: Optional[CheckpointFile] = field(default=None, repr=False)
    _progress_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _progress: Optional[Tuple[int, str]] = field(default=None, repr=False)
    _progress_seq: int = field(default=0, repr=False)
    _progress_sent: int = field(default=0, repr=False)
    _progressed: Optional[threading.Event] = field(default=None, repr=False)  # the worker's, set at each update
    _client: Optional[Client] = field(default=None, repr=False)  # set by the Worker: steps record through it
    _journal: Optional[Journal] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self._client is not None and self._journal is None:
            self._journal = Journal(self._client, self.job, self.stopping, self.lease_lost)

    def step(self, name: str, fn: Callable[[], Any], attempts: Optional[int] = None,
             backoff: StepBackoff = None) -> Any:
        """Runs fn as step ``name`` of the job's journal, or returns what an
        earlier attempt recorded for it without running it (durable steps,
        docs/workers.md). The n-th step of one name in an attempt is
        "name#n" (the first is "name"). fn's return value (JSON) is recorded,
        committed before step returns it; if another attempt recorded the
        step first, its value is returned instead. When fn raises NoRetry
        the step is recorded failed and StepFailed (a NoRetry) is raised,
        in this attempt and every later one.

        Without ``attempts``, any other exception records nothing and fails
        the attempt (a later one runs the step again). With ``attempts`` the
        step retries on its own inside the attempt: fn is tried up to
        attempts times (at most 1,000), ``backoff`` apart (a Backoff, by
        default 1s doubling to a minute; seconds; or a function of the tries
        so far returning seconds), and when the last try raises, the step is
        recorded failed (StepFailed); the tries it took are recorded as the
        step's attempts. A JobContext not given by a Worker runs fn and
        returns its value."""
        if self._journal is None:
            return fn()
        return self._journal.run(name, fn, attempts, backoff)

    def sleep(self, name: str, seconds: Duration) -> None:
        """Durable sleep ``name`` of ``seconds`` (a number, a timedelta or a
        Go duration; at most 365 days): the first time, it raises Parked
        (the attempt ends uncharged and the worker's slot is free) and the
        job runs again once the time has passed, decided by the cluster;
        replayed then, it returns at once. Counts in the same per-name
        sequence as step. A JobContext not given by a Worker returns at
        once."""
        if self._journal is not None:
            self._journal.sleep(name, duration=seconds)

    def sleep_until(self, name: str, when: _dt.datetime) -> None:
        """sleep until a time (a datetime, UTC if naive): returns at once
        when it has passed."""
        if self._journal is not None:
            self._journal.sleep(name, until=when)

    def wait_for_event(self, name: str, event: str, key: str, timeout: Optional[Duration] = None) -> Any:
        """Waits, parked, for an event of that name and key
        (Client.send_event; one sent before the wait, within the server's
        look-back window, counts) and returns its payload. ``timeout``
        (seconds, a timedelta or a Go duration; None: wait until the event
        comes or the job is cancelled) passed first, it raises StepTimeout,
        in this attempt and every later one. The first call raises Parked
        unless the event was sent already."""
        return self._parking().wait(name, event=event, event_key=key, timeout=timeout)

    def wait_for_signal(self, name: str, signal: str, timeout: Optional[Duration] = None) -> Any:
        """wait_for_event for a signal sent to this job (Client.signal)."""
        return self._parking().wait(name, signal=signal, timeout=timeout)

    def invoke(self, name: str, job: Spec) -> Any:
        """Submits job (a JobSpec or a dict, as for Client.submit) as a
        child, once whatever the attempts, parks until it ends, and returns
        its result (None if none). A child that failed or was cancelled
        raises ChildFailed (a StepFailed), in this attempt and every later
        one. The first call raises Parked."""
        return self._parking().invoke(name, job)

    def _parking(self) -> Journal:
        if self._journal is None:
            raise RuntimeError("waits and invokes need the JobContext a Worker gives a handler")
        return self._journal

    @property
    def parked(self) -> bool:
        """Whether a sleep, wait or invoke of this attempt parked the job
        (its attempt has ended)."""
        return self._journal is not None and self._journal.parked is not None

    def progress(self, percent: int, message: str = "") -> None:
        """Records how far the job is: percent from 0 to 100 (held to those
        bounds) and a short message (cut to 200 bytes). It does not block:
        the worker sends the latest update at once, or at most one
        ``progress_interval`` after the last it sent, so calling it often
        costs nothing more. LeaseLost once the lease is lost."""
        self.check_lease()
        self._record_progress(percent, message)

    def _record_progress(self, percent: int, message: str) -> None:
        """progress, for a command's progress lines: never raises."""
        raw = message.encode("utf-8")[:MAX_PROGRESS_MESSAGE]
        msg = raw.decode("utf-8", "ignore")
        with self._progress_lock:
            self._progress = (min(max(int(percent), 0), 100), msg)
            self._progress_seq += 1
        if self._progressed is not None:
            self._progressed.set()

    def _pending_progress(self) -> Optional[Tuple[Tuple[int, str], int]]:
        """The update no heartbeat has carried yet, and its number."""
        with self._progress_lock:
            if self._progress is None or self._progress_seq == self._progress_sent:
                return None
            return self._progress, self._progress_seq

    def _delivered(self, seq: int) -> None:
        with self._progress_lock:
            self._progress_sent = max(self._progress_sent, seq)

    def save_checkpoint(self, data: bytes) -> None:
        """Replaces a gang task's checkpoint (at most 1 MiB; ValueError
        beyond, and for a job of no gang). When the gang drains, the worker
        uploads the latest one, and the task's next attempt finds it in
        ``job.checkpoint``. Processes of the handler may write the file
        ``checkpoint_path`` (WORKRON_CHECKPOINT in ``environ()``) instead."""
        self.check_lease()
        if self._ckpt is None:
            raise ValueError(f"job {self.job.id} is not a gang task: it has no checkpoint")
        self._ckpt.write(data)

    def check_lease(self) -> None:
        """Raises LeaseLost when the worker lost the attempt's lease: a
        handler that makes no other SDK call for a while calls it where it
        can stop (or looks at ``lease_lost``)."""
        check(self.lease_lost, self.job.id, self.job.lease)

    def _lose_lease(self, reason: str) -> None:
        """Tells the handler that the attempt's lease is lost."""
        self.lease_lost.set()  # before stopping: a handler woken by stopping sees why
        self.stop_reason = reason
        self.stopping.set()

    @property
    def checkpoint_path(self) -> Optional[str]:
        """The path of a gang task's checkpoint file (None for other jobs)."""
        return self._ckpt.path if self._ckpt is not None else None

    @property
    def parent_results(self) -> Dict[str, Any]:
        """The results of the jobs this one depends on, by id (those that
        returned none left out): all of them (when the claim reply carried
        only some, the worker read the rest before the handler ran)."""
        return self.job.parent_results

    def environ(self) -> Dict[str, str]:
        """An environment for the handler's processes: the worker's, the
        job's env (with a gang task's WORKRON_CHECKPOINT), WORKRON_JOB_ID,
        WORKRON_ATTEMPT and, when the job has a trace, TRACEPARENT
        (os.environ is shared by every running job, so the worker sets none
        of these there)."""
        env = {k: v for k, v in os.environ.items() if k not in ("TRACEPARENT", "TRACESTATE")}
        env.update(self.job.env)
        env.update(WORKRON_JOB_ID=self.job.id, WORKRON_ATTEMPT=str(self.job.attempts))
        if self.traceparent:
            env["TRACEPARENT"] = self.traceparent
        return env

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def type(self) -> str:
        return self.job.type

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def lease(self) -> int:
        return self.job.lease

    @property
    def attempt(self) -> int:
        """The attempt's number, from 1."""
        return self.job.attempts


@dataclass
class _Task:
    ctx: JobContext
    settled: bool = False  # its end is decided: reported, or preempted
    timer: Optional[threading.Timer] = None
    # A command stopped (timeout, cancel, shutdown): the report's error.
    cause: str = ""
    retry: bool = True
    preempt_epoch: int = 0  # the drain that preempted it (0: none)
    proc: Optional[subprocess.Popen] = None  # a command's, once it runs
    signalled: bool = False
    kill_timer: Optional[threading.Timer] = None
    ended: threading.Event = field(default_factory=threading.Event)  # its handler or command returned

    @property
    def command(self) -> bool:
        return bool(self.ctx.job.command)

    @property
    def key(self) -> Tuple[str, int]:
        return self.ctx.job.id, self.ctx.job.lease


class Worker:
    """Runs handlers registered by job type for jobs claimed from the cluster.

    ``servers`` (by default WORKRON_SERVER, else the quick starts' nodes),
    ``token``, ``token_file`` and ``tls_ca`` are as for Client (the token
    needs the worker role). ``id`` defaults to HOSTNAME-PID; ``queues`` are served
    in order of preference; ``concurrency`` is how many jobs run at once (the
    slots it registers); ``poll_wait`` the seconds one claim long-polls;
    ``grace`` how long running jobs may finish after stop() or SIGTERM
    before they are reported failed. ``trace_hook`` wraps each handler to
    continue the job's trace (see workron.tracing).

    ``shell`` makes it run shell-command jobs too (``sh -c``; see shell.py),
    with the worker's variables of ``pass_env`` besides the base ones, the
    last ``output_tail`` bytes of output reported, and ``kill_grace``
    seconds between SIGTERM and SIGKILL when one is stopped; a preempted
    gang task's handler has the kill grace to return. ``progress_interval``
    is the least time in seconds between two sends of progress (at least
    0.1). ``exec_addr``
    (where gang peers reach this worker), ``tags`` and ``resources`` are
    registered.
    """

    def __init__(self, servers: Union[str, Sequence[str], None] = None, *, id: Optional[str] = None,
                 queues: Sequence[str] = ("default",), concurrency: int = 4, token: Optional[str] = None,
                 token_file: Optional[str] = None, tls_ca: Optional[str] = None, poll_wait: float = 30.0,
                 grace: float = 30.0,
                 tags: Sequence[str] = (), resources: Optional[Resources] = None, exec_addr: str = "",
                 shell: bool = False, pass_env: Sequence[str] = (), kill_grace: float = 5.0,
                 output_tail: int = 4096, progress_interval: float = 1.0,
                 logger: Optional[logging.Logger] = None, trace_hook: Optional[TraceHook] = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, got {concurrency}")
        if poll_wait < 0 or grace < 0 or kill_grace < 0:
            raise ValueError("poll_wait, grace and kill_grace must not be negative")
        if progress_interval < 0.1:
            raise ValueError(f"progress_interval: must be at least 0.1 seconds, got {progress_interval}")
        if not 0 <= output_tail <= 1 << 20:
            raise ValueError(f"output_tail: must be from 0 to {1 << 20} bytes, got {output_tail}")
        self.shell = shell
        self.exec_addr = exec_addr
        self.kill_grace = kill_grace
        self.output_tail = output_tail
        self.progress_interval = progress_interval
        self._env_names = list(BASE_ENV) + check_pass_env(pass_env)
        self._watcher: Optional[Watcher] = None
        self.id = id or f"{socket.gethostname()}-{os.getpid()}"
        self.client = Client(servers, token=token, token_file=token_file, tls_ca=tls_ca)
        self.queues = list(queues)
        self.concurrency = concurrency
        self.poll_wait = poll_wait
        self.grace = grace
        self.tags = list(tags)
        self.resources = resources or Resources()
        if not self.resources.slots:
            self.resources.slots = concurrency
        self.log = logger or logging.getLogger("workron.worker")
        self._handlers: Dict[str, Handler] = {}
        self._trace_hook = trace_hook
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()  # stop claiming
        self._quit = threading.Event()  # the heartbeat and reporter end
        self._kick = threading.Event()  # the heartbeat loop looks again
        self._abort = Abort()
        self._actions_abort = Abort()  # cuts the actions long-poll at the end
        self._progressed = threading.Event()  # a running job made progress
        self._jobs_began = threading.Event()  # the actions loop looks again
        self._running: Dict[Tuple[str, int], _Task] = {}
        self._reports: List[Dict[str, Any]] = []  # queued
        self._sending: Dict[Tuple[str, int], Dict[str, Any]] = {}  # sent, not answered
        self._lease_ttl = _DEFAULT_LEASE_TTL  # the server's, from each claim reply
        self._leases = LeaseClock(self._lease_expired)  # each attempt's lease end, by this worker's clock
        self._claims_from = time.time_ns()
        self._claims_ended = 0
        self._claim_lost = 0
        self._progress_off_until = 0.0

    def handle(self, job_type: str, fn: Optional[Handler] = None) -> Any:
        """Registers fn for jobs of job_type; usable as a decorator
        (``@worker.handle("email.send")``). A handler that returns ends the
        attempt done, what it returns (any JSON value, at most 64 KiB; None:
        nothing) being the job's result; one that raises fails it, with the
        traceback as its error (NoRetry: no more attempts; RateLimited and
        Snooze: the attempt does not count, see them)."""
        if not job_type:
            raise ValueError("job_type: must not be empty")

        def register(f: Handler) -> Handler:
            self._handlers[job_type] = f
            return f

        return register(fn) if fn is not None else register

    def stop(self) -> None:
        """Starts a graceful stop: no more claims; run() returns once the
        running jobs finished or the grace period ended."""
        self._stop.set()
        self._abort.abort()
        with self._cond:
            self._cond.notify_all()

    def run(self, *, install_signals: bool = True) -> None:
        """Registers and serves until stop() (or SIGTERM/SIGINT, with
        install_signals, from the main thread), then shuts down: running jobs
        get ``grace`` seconds, the rest are reported failed, every report is
        sent, and a last heartbeat gives back what a cut claim leased."""
        if not self._handlers and not self.shell:
            raise ValueError("no handlers: call handle() first, or run shell commands (shell=True)")
        previous = {}
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            self._serve()
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)

    def _serve(self) -> None:
        if self.shell:
            self._watcher = Watcher(self.log)
        try:
            self._serve_registered()
        finally:
            if self._watcher is not None:  # every command has ended, or is killed now
                self._watcher.stop()
                self._watcher = None

    def _serve_registered(self) -> None:
        if not self._register():
            return
        self.log.info("worker %s serving %s%s", self.id, sorted(self._handlers), " and shell commands" * self.shell)
        threads = [threading.Thread(target=f, name=f"workron-{n}", daemon=True)
                   for n, f in (("claim", self._claim_loop), ("heartbeat", self._heartbeat_loop),
                                ("reporter", self._report_loop), ("progress", self._progress_loop),
                                ("actions", self._actions_loop), ("leases", self._leases.run))]
        for t in threads:
            t.start()
        while not self._stop.wait(0.2):  # wakes so signal handlers run
            pass
        threads[0].join()
        self._drain()
        self._quit.set()
        self._leases.close()
        self._kick.set()
        self._progressed.set()
        self._jobs_began.set()
        self._actions_abort.abort()
        with self._cond:
            self._cond.notify_all()
        for t in threads[1:]:
            t.join()
        self._flush()
        self._final_heartbeat()
        self.log.info("worker %s stopped", self.id)

    def _register(self) -> bool:
        delay = 0.1
        while not self._stop.is_set():
            try:
                self.client.register(self.id, queues=self.queues, tags=self.tags, resources=self.resources,
                                     exec_addr=self.exec_addr)
                return True
            except WorkronError as e:
                if e.status in (400, 401, 403):
                    raise
                self.log.warning("register failed: %s", e)
            self._stop.wait(delay)
            delay = min(delay * 2, 5.0)
        return False

    # ---- claims

    def _claim_loop(self) -> None:
        seq, delay = self._claims_from, 0.1
        types = sorted(self._handlers)
        while True:
            with self._cond:
                while not self._stop.is_set() and len(self._running) >= self.concurrency:
                    self._cond.wait()
                if self._stop.is_set():
                    return
                free = self.concurrency - len(self._running)
                reps, self._reports = self._reports[:1000], self._reports[1000:]
                for r in reps:
                    self._sending[(r["job_id"], r["lease"])] = r
            began = time.monotonic()
            try:
                jobs, ttl, answers = self.client.claim(
                    self.id, types=types, shell=self.shell, queues=self.queues, max=free, claim_seq=seq, reports=reps,
                    wait="0s" if reps else self.poll_wait, abort=self._abort)
                got = time.monotonic()  # the leases began before: their ends are at most this + TTL
            except WorkronError as e:
                self._answered(reps, None)
                with self._cond:
                    self._claims_ended = self._claim_lost = seq
                self._kick.set()
                if not self._stop.is_set():
                    self.log.warning("claim failed: %s", e)
                    if e.status == 404:
                        self._register()
                    self._stop.wait(delay)
                    delay = min(delay * 2, 5.0)
                seq += 1
                continue
            self._answered(reps, answers)
            with self._cond:
                if ttl > 0:
                    self._lease_ttl = ttl / 1000.0
                if not self._stop.is_set():  # else the last heartbeat gives them back
                    for j in jobs:
                        self._start(j, got)
                self._claims_ended = seq
            if jobs:
                self._kick.set()
            seq += 1
            if not jobs and not reps and time.monotonic() - began < min(1.0, self.poll_wait / 2):
                self._stop.wait(delay)  # answered at once with nothing: do not spin
                delay = min(delay * 2, 5.0)
            else:
                delay = 0.1

    def _start(self, job: Job, got: float) -> None:
        """Starts job's handler or command, claimed by a reply that arrived
        at got (time.monotonic); called with the lock held."""
        task = _Task(JobContext(job, traceparent=job.traceparent, _progressed=self._progressed,
                                _client=self.client))
        self._jobs_began.set()
        self._with_checkpoint(task)
        self._running[task.key] = task
        self._leases.begin(task.key, got + self._lease_ttl)
        timeout = parse_go_duration(job.timeout)
        if timeout:
            task.timer = threading.Timer(timeout, self._stop_task, (task, f"timed out after {job.timeout}"))
            task.timer.daemon = True
            task.timer.start()
        run = self._run_command if task.command else self._run_task
        threading.Thread(target=run, args=(task,), name=f"workron-job-{job.id}", daemon=True).start()

    def _with_checkpoint(self, task: _Task) -> None:
        """Gives a gang task its gang and checkpoint file (its path in the
        job's env as WORKRON_CHECKPOINT, as the Go worker does)."""
        ctx = task.ctx
        ctx.gang = Gang.from_env(ctx.job.env)
        if ctx.gang is None:
            return
        try:
            ck = CheckpointFile(ctx.job.env, self.log)
        except OSError as e:
            self.log.warning("job %s: no checkpoint file for this gang task: %s", ctx.id, e)
            return
        ctx._ckpt, ctx.checkpoint = ck, ck.restored
        ctx.job.env = ck.env(ctx.job.env)

    def _run_task(self, task: _Task) -> None:
        try:
            self._call_handler(task)
        finally:
            task.ended.set()
            self._release(task)

    def _release(self, task: _Task) -> None:
        """Removes the checkpoint file of a task that ended unpreempted (a
        preempted one's goes after its upload)."""
        with self._cond:
            preempted = task.preempt_epoch != 0
        if not preempted and task.ctx._ckpt is not None:
            task.ctx._ckpt.remove()

    def _call_handler(self, task: _Task) -> None:
        handler = self._handlers.get(task.ctx.type)
        try:
            if handler is None:
                raise NoRetry(f"no handler for job type {task.ctx.type!r}")
            self.client.fetch_parent_results(task.ctx.job)  # all of them, when the claim cut them short
            with traced(self._trace_hook, task.ctx):
                value = handler(task.ctx)
        except Parked:
            self._park(task)
        except BaseException as e:  # noqa: B036 - any failure fails the attempt, not the worker
            self._settle_raised(task, e)  # parked instead if it parked (_settle)
        else:
            self._settle_result(task, value)  # parked instead if it parked and caught Parked

    def _settle_raised(self, task: _Task, e: BaseException) -> None:
        """Ends task's attempt as what its handler raised says."""
        if isinstance(e, NoRetry):
            self._settle(task, "failed", error=traceback.format_exc(), retry=False)
        elif isinstance(e, RateLimited):
            self._settle(task, "failed", error=e.reason or str(e), hold={"rate_limited_for": bound_hold_off(e.after)})
        elif isinstance(e, Snooze):
            self._settle(task, "failed", error=str(e), hold={"snooze_for": bound_hold_off(e.after)})
        else:
            self._settle(task, "failed", error=traceback.format_exc())

    def _stop_parked(self, task: _Task) -> None:
        """Stops the command of a shell job that parked through its step
        socket (`workron sleep` and the like): SIGTERM, the kill grace,
        SIGKILL. Its attempt ends without a report once it has ended."""
        with self._cond:
            if task.settled or task.cause:
                return
            task.cause = "parked"
        self.log.info("stopping job %s: it parked", task.ctx.id)
        self._interrupt(task, "parked")

    def _park(self, task: _Task) -> None:
        """Ends an attempt a sleep, wait or invoke parked: the server ended
        it already, so the worker frees its slot and reports nothing."""
        with self._cond:
            if task.settled:
                return
            task.settled = True
            self._running.pop(task.key, None)
            self._cond.notify_all()
        self._leases.end(task.key)
        if task.timer is not None:
            task.timer.cancel()
        step = task.ctx._journal.parked if task.ctx._journal is not None else None
        self.log.info("job %s parked on %s", task.ctx.id, f"{step.get('kind', 'step')} {step.get('key', '')}"
                      if step else "a step")
        task.ctx.stop_reason = "parked"
        task.ctx.stopping.set()

    def _run_command(self, task: _Task) -> None:
        """Runs a shell job's command and settles its attempt: reported, or
        when its gang drained, its checkpoint uploaded and acknowledged."""
        ctx = task.ctx
        job = ctx.job
        env = command_env(job.env, self._env_names, job.id, job.attempts, ctx.traceparent)
        if ctx._journal is not None:
            ctx._journal.on_park = lambda: self._stop_parked(task)
        try:
            self.client.fetch_parent_results(job)  # all of them, when the claim cut them short
            cmd = Command(job.command, env, job.parent_results, self.output_tail, ctx._record_progress, self._watcher,
                          lambda proc: self._started(task, proc), journal=ctx._journal, log=self.log)
            out = cmd.run()
        except Exception:  # noqa: BLE001 - a failure fails the attempt, not the worker
            out = Outcome("failed", error=traceback.format_exc())
        if task.kill_timer is not None:
            task.kill_timer.cancel()
        task.ended.set()
        with self._cond:
            cause, retry = task.cause, task.retry
        if cause:
            out.status, out.error, out.result, out.hold = "failed", cause, None, {}
        # Parked through its step socket, the attempt is not reported (_settle).
        settled = self._settle(task, out.status, error=out.error, retry=retry, result=out.result, hold=out.hold,
                               exit_code=out.exit_code, output=out.output)
        if not settled and task.preempt_epoch:
            self._finish_preempted(task)
        self._release(task)

    def _started(self, task: _Task, proc: subprocess.Popen) -> None:
        """Keeps a command's process, and stops it if its task was stopped
        before it ran."""
        with self._cond:
            task.proc = proc
            stop = task.ctx.stopping.is_set()
        if stop:
            self._signal(task)

    def _settle_result(self, task: _Task, value: Any) -> None:
        """Ends task's attempt done with value as its result, or failed for
        good when value is not JSON or too large."""
        if value is None:
            self._settle(task, "done")
            return
        try:
            size = len(json.dumps(value, separators=(",", ":")).encode("utf-8"))
        except (TypeError, ValueError) as e:
            self._settle(task, "failed", error=f"the handler's result is not JSON: {e}", retry=False)
            return
        if size > MAX_RESULT_BYTES:
            self._settle(task, "failed", retry=False,
                         error=f"the handler's result is {size} bytes of JSON, more than {MAX_RESULT_BYTES}")
            return
        self._settle(task, "done", result=value)

    def _settle(self, task: _Task, status: str, *, error: str = "", retry: bool = True, result: Any = None,
                hold: Optional[Dict[str, str]] = None, exit_code: Optional[int] = None, output: str = "") -> bool:
        """Ends task's attempt once and reports whether this call did: the
        first of its handler, its timeout, a cancel, the end of the grace
        period, a preemption and the loss of the lease wins. An attempt
        that parked is not reported (its lease has ended): it is parked
        instead; nor is one whose lease was lost (_lose_lease)."""
        if task.ctx.parked:
            self._park(task)
            return False
        if task.ctx.lease_lost.is_set():
            self._forget(task)
            return False
        with self._cond:
            if task.settled:
                return False
            task.settled = True
            job = task.ctx.job
            self._running.pop(task.key, None)
            rep: Dict[str, Any] = {"job_id": job.id, "status": status, "lease": job.lease}
            if error:
                rep["error"] = error[-4096:]
            if exit_code is not None:
                rep["exit_code"] = exit_code
            if output:
                rep["output"] = output
            if not retry:
                rep["retry"] = False
            rep.update(hold or {})
            if result is not None:
                rep["result"] = result
            pending = task.ctx._pending_progress()  # the last progress no heartbeat carried
            if pending is not None:
                rep["progress"] = _progress_body(pending[0])
            if task.ctx.traceparent != job.traceparent:  # a trace_hook's span
                rep["traceparent"] = task.ctx.traceparent
            self._reports.append(rep)  # queued before it leaves the running set, in one step
            self._cond.notify_all()
        self._leases.end(task.key)
        if task.timer is not None:
            task.timer.cancel()
        if status != "done":
            task.ctx.stop_reason = error.strip().splitlines()[-1] if error else status
            task.ctx.stopping.set()
        return True

    # ---- stops and preemptions

    def _stop_task(self, task: _Task, error: str, retry: bool = True) -> None:
        """Ends a running attempt early (timeout, cancel, shutdown): a
        handler's is reported failed at once; a command is stopped and
        reported when it has ended."""
        if not task.command:
            self._settle(task, "failed", error=error, retry=retry)
            return
        with self._cond:
            if task.settled or task.cause:
                return
            task.cause, task.retry = error, retry
        self.log.info("stopping job %s: %s", task.ctx.id, error)
        self._interrupt(task, error)

    def _interrupt(self, task: _Task, reason: str) -> None:
        """Tells the handler to return, and stops the command."""
        task.ctx.stop_reason = reason
        task.ctx.stopping.set()
        with self._cond:
            running = task.proc is not None
        if running:
            self._signal(task)

    def _signal(self, task: _Task) -> None:
        """SIGTERM to the command's process group, SIGKILL after the kill
        grace; once."""
        with self._cond:
            proc = task.proc
            if proc is None or task.signalled:
                return
            task.signalled = True
        kill_group(proc.pid, signal.SIGTERM)
        task.kill_timer = threading.Timer(self.kill_grace, self._kill, (task, proc))
        task.kill_timer.daemon = True
        task.kill_timer.start()

    def _kill(self, task: _Task, proc: subprocess.Popen) -> None:
        if not task.ended.is_set():
            self.log.warning("job %s ignored SIGTERM: sending SIGKILL", task.ctx.id)
            kill_group(proc.pid, signal.SIGKILL)

    def _forget(self, task: _Task) -> None:
        """Ends task's attempt without a report and frees its slot."""
        with self._cond:
            task.settled = True
            if self._running.get(task.key) is task:
                del self._running[task.key]
            self._cond.notify_all()
        self._leases.end(task.key)

    def _lease_expired(self, key: Key) -> None:
        self._lose_lease(key, f"not renewed within its {self._lease_ttl:g}s TTL")

    def _lose_lease(self, key: Key, why: str) -> None:
        """Stops attempt key, whose lease is lost (why), unless its end was
        decided first: a command as on a cancel (SIGTERM to its process
        group, SIGKILL after the kill grace), its slot held until it ended;
        a handler is told (lease_lost, stopping; its SDK calls raise
        LeaseLost) and its thread abandoned, its slot free at once. Neither
        is reported: the cluster may have given the job to another worker."""
        with self._cond:  # one step: a handler that returns meanwhile is reported, or not at all
            task = self._running.get(key)
            if task is None or task.settled or task.cause:
                return
            task.cause = "lease lost"
            task.ctx._lose_lease(f"lease lost: {why}")  # _settle now forgets it
            if not task.command:
                task.settled = True
                del self._running[key]
                self._cond.notify_all()
        self._leases.end(key)
        if task.timer is not None:
            task.timer.cancel()
        self.log.warning("job %s: lease %d lost (%s): stopping the job; its attempt is not reported", key[0],
                         key[1], why)
        self._signal(task)  # a command's; one not started yet is stopped when it starts (_started)

    def _preempt(self, task: _Task, epoch: int) -> None:
        """Stops a gang task for the drain of epoch: its attempt is not
        reported; its checkpoint is uploaded and the preemption acknowledged
        once its command ended or its handler returned (or the kill grace
        passed)."""
        with self._cond:
            if task.settled or task.cause:  # the first reason to stop wins
                return
            task.settled, task.preempt_epoch = True, epoch
        if task.timer is not None:
            task.timer.cancel()
        self.log.info("stopping job %s: its gang drains (epoch %d)", task.ctx.id, epoch)
        task.ctx.stop_reason = "preempted"
        task.ctx.preempted.set()  # before stopping: a handler woken by stopping sees why
        self._interrupt(task, "preempted")
        if not task.command:  # a command's thread finishes it when the command ends
            threading.Thread(target=self._await_handler, args=(task,), name=f"workron-preempt-{task.ctx.id}",
                             daemon=True).start()

    def _await_handler(self, task: _Task) -> None:
        if not task.ended.wait(self.kill_grace):
            self.log.warning("job %s: the handler did not return within the %ss kill grace after its preemption; "
                             "uploading the checkpoint it saved", task.ctx.id, self.kill_grace)
        self._finish_preempted(task)

    def _finish_preempted(self, task: _Task) -> None:
        """Uploads a preempted task's checkpoint file, if not empty, and
        acknowledges the preemption, for at most one lease TTL; then frees
        its slot. A 409 or 404 means the drain is over: nothing more."""
        job, ck, epoch = task.ctx.job, task.ctx._ckpt, task.preempt_epoch
        deadline = time.monotonic() + self._lease_ttl
        try:
            data = ck.read(self.log) if ck is not None else None
            if data:
                self._retry("checkpoint", job.id, lambda: self.client.checkpoint(job.id, epoch, data), deadline)
            if self._retry("preemption acknowledgement", job.id, lambda: self.client.preempted(job.id, epoch),
                           deadline):
                self.log.info("job %s: preemption acknowledged (epoch %d)", job.id, epoch)
        finally:
            if ck is not None:
                ck.remove()
            self._forget(task)

    def _retry(self, what: str, job_id: str, send: Callable[[], Any], deadline: float) -> bool:
        """Calls send until it succeeds, the server refuses for good, or the
        deadline (time.monotonic) passes, and reports whether it succeeded."""
        delay = 0.1
        while True:
            try:
                send()
                return True
            except WorkronError as e:
                if e.status in (404, 409):
                    self.log.warning("%s of job %s dropped: the server moved on: %s", what, job_id, e)
                    return False
                if not (e.status == 0 or e.status >= 500 or e.status == 429):
                    self.log.error("%s of job %s refused: %s", what, job_id, e)
                    return False
                if time.monotonic() + delay > deadline:
                    self.log.error("%s of job %s abandoned after one lease TTL: %s", what, job_id, e)
                    return False
                self.log.warning("%s of job %s failed, retrying: %s", what, job_id, e)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    # ---- reports

    def _answered(self, reps: List[Dict[str, Any]], answers: Optional[List[Dict[str, Any]]]) -> None:
        """Settles reports sent: answered ones are done, the others queue again."""
        if not reps:
            return
        with self._cond:
            for r in reps:
                self._sending.pop((r["job_id"], r["lease"]), None)
            if answers is None or len(answers) != len(reps):
                self._reports[:0] = reps
                self._cond.notify_all()
                return
            again = [r for r, a in zip(reps, answers) if a.get("code") in _RESEND_CODES]
            for r, a in zip(reps, answers):
                if a.get("code") == "upgrade_in_progress":
                    # A node cannot take rate-limited or snoozed yet: a plain failure.
                    r.pop("rate_limited_for", None)
                    r.pop("snooze_for", None)
                    if (r.pop("result", None), r.pop("progress", None)) != (None, None):
                        self.log.warning("result and progress of job %s dropped: a member of the cluster runs a "
                                         "release without them", r["job_id"])
            self._reports[:0] = again
            if again:
                self._cond.notify_all()
        for r, a in zip(reps, answers):
            if a.get("error") and a.get("code") not in _RESEND_CODES:
                self.log.warning("report %s of job %s refused: %s (%s)", r, r["job_id"], a.get("error"), a.get("code"))

    def _report_loop(self) -> None:
        """Sends the reports no claim carried, in batches."""
        while True:
            with self._cond:
                while not self._reports and not self._quit.is_set():
                    self._cond.wait()
                if self._quit.is_set():
                    return
            time.sleep(0.02)  # let a claim about to start carry them, and let more gather
            if not self._send_reports():
                self._quit.wait(0.5)

    def _send_reports(self) -> bool:
        with self._cond:
            reps, self._reports = self._reports[:1000], self._reports[1000:]
            for r in reps:
                self._sending[(r["job_id"], r["lease"])] = r
        if not reps:
            return True
        try:
            answers = self.client.reports(reps)
        except WorkronError as e:
            self.log.warning("reports failed: %s", e)
            self._answered(reps, None)
            return False
        self._answered(reps, answers)
        return True

    def _flush(self) -> None:
        for _ in range(10):
            with self._cond:
                if not self._reports:
                    return
            if not self._send_reports():
                time.sleep(0.5)

    # ---- heartbeats

    def _heartbeat_wait(self) -> float:
        """How long to wait before the next heartbeat, as the Go worker
        does: a third of the lease TTL the last claim reply announced, but
        at most a second while a failed claim waits to be named (the jobs
        it may have leased go back only then)."""
        d = self._lease_ttl / 3
        with self._cond:
            if self._claim_lost:
                d = min(d, 1.0)
        return d

    def _heartbeat_loop(self) -> None:
        """Heartbeats every third of the lease TTL while the worker holds
        attempts (or a failed claim may have leased some); a failed
        heartbeat is tried again within a second."""
        next_at = time.monotonic() + self._heartbeat_wait()
        while not self._quit.is_set():
            if self._kick.wait(max(next_at - time.monotonic(), 0)):
                self._kick.clear()  # jobs started, a claim failed, or the TTL changed
                next_at = min(next_at, time.monotonic() + self._heartbeat_wait())
                continue
            next_at = time.monotonic() + self._heartbeat_wait()
            with self._cond:
                idle = not self._running and not self._reports and not self._sending and not self._claim_lost
            if idle:
                continue
            try:
                self._heartbeat_once()
            except WorkronError as e:
                self.log.warning("heartbeat failed: %s", e)
                next_at = time.monotonic() + min(self._lease_ttl / 3, 1.0)

    def _heartbeat_once(self) -> None:
        with self._cond:
            lost, claims_to = self._claim_lost, self._claims_ended
            # Jobs of the claims up to claims_to are in one of these now.
            leases = self._held() + [k for k in self._sending if k not in self._running]
            leases += [(r["job_id"], r["lease"]) for r in self._reports]
        try:
            reply = self._send_heartbeat(sorted(set(leases)), claims_to)
        except WorkronError as e:
            if e.status == 404:  # the cluster forgot this worker
                self._register()
                return
            raise
        with self._cond:
            if lost and claims_to >= lost and self._claim_lost == lost:
                self._claim_lost = 0
        for a in reply.get("actions") or []:
            self._act(a)

    def _held(self) -> List[Key]:
        """The attempts running whose leases the heartbeats renew: not those
        whose lease is lost (a command still stopping), which the cluster
        lets expire. Called with the lock held."""
        return [k for k, t in self._running.items() if not t.ctx.lease_lost.is_set()]

    def _act(self, a: Dict[str, Any]) -> bool:
        """Carries out one action of a heartbeat's (or the actions
        long-poll's) reply; False when it names no job running here."""
        with self._cond:
            task = self._running.get((a.get("job_id"), a.get("lease")))
        if task is None:
            return False
        action = a.get("action")
        if action == "cancel":
            self._stop_task(task, "cancelled", retry=False)
        elif action == "preempt" and a.get("preemption_epoch"):
            self._preempt(task, int(a["preemption_epoch"]))
        elif action == "preempt":
            self._stop_task(task, "preempted")
        else:
            self.log.warning("unknown heartbeat action %r for job %s ignored", action, task.ctx.id)
            return False
        return True

    def _send_heartbeat(self, leases: List[Key], claims_to: int) -> Dict[str, Any]:
        """Sends one heartbeat (_beat) and moves the lease end of each
        attempt it names to its reply's arrival plus the lease TTL, but
        stops those the reply names lost; refused with stale_lease or
        not_running, it stops all those attempts: their leases are lost.
        The stopped ones are left out of later heartbeats (_held)."""
        try:
            reply = self._beat(leases, claims_to)
        except WorkronError as e:
            if refused(e):
                for k in leases:
                    self._lose_lease(k, f"the cluster refused a heartbeat: {e}")
            raise
        got = time.monotonic()
        lost = named_lost(reply, leases)
        for k, reason in lost:
            self._lose_lease(k, f"the cluster did not renew it ({reason})")
        gone = {k for k, _ in lost}
        self._leases.renew([k for k in leases if k not in gone], got + self._lease_ttl)
        return reply

    def _beat(self, leases: List[Key], claims_to: int) -> Dict[str, Any]:
        """Sends one heartbeat with the progress of the running jobs that no
        heartbeat has carried yet; refused for it (a member runs an older
        release), it is sent again without, and none for a while."""
        progress: Dict[Tuple[str, int], Tuple[int, str]] = {}
        delivered: List[Tuple[JobContext, int]] = []
        if time.monotonic() >= self._progress_off_until:
            with self._cond:
                tasks = [t for k, t in self._running.items() if k in set(leases)]
            for t in tasks:
                pending = t.ctx._pending_progress()
                if pending is not None:
                    progress[(t.ctx.id, t.ctx.lease)] = pending[0]
                    delivered.append((t.ctx, pending[1]))
        try:
            reply = self.client.heartbeat_worker(self.id, leases, claims_from=self._claims_from,
                                                 claims_to=claims_to, progress=progress)
        except WorkronError as e:
            if not progress or e.code != "upgrade_in_progress":
                raise
            self.log.warning("the cluster does not take progress yet (a member runs an older release)")
            self._progress_off_until = time.monotonic() + _PROGRESS_OFF_FOR
            return self.client.heartbeat_worker(self.id, leases, claims_from=self._claims_from, claims_to=claims_to)
        for ctx, seq in delivered:
            ctx._delivered(seq)
        return reply

    def _progress_loop(self) -> None:
        """Sends the progress jobs make between heartbeats: at once, or
        progress_interval after the last send."""
        last = -self.progress_interval
        while True:
            self._progressed.wait()
            if self._quit.is_set():
                return
            if self._quit.wait(max(last + self.progress_interval - time.monotonic(), 0)):
                return
            self._progressed.clear()
            last = time.monotonic()
            try:
                self._send_progress()
            except WorkronError as e:
                self.log.warning("progress not sent: %s", e)

    def _send_progress(self) -> None:
        """Sends, in a heartbeat of its own, the new progress of the running
        jobs that have some: it lists only them and names no claims, so the
        cluster gives nothing back for the jobs it leaves out."""
        if time.monotonic() < self._progress_off_until:
            return
        with self._cond:
            tasks = [self._running[k] for k in self._held()]
        leases = sorted(t.key for t in tasks if t.ctx._pending_progress() is not None)
        if not leases:
            return
        reply = self._send_heartbeat(leases, 0)
        for a in reply.get("actions") or []:
            self._act(a)

    # ---- actions

    def _actions_loop(self) -> None:
        """Holds the actions long-poll while jobs run, and acts on what it
        answers as on a heartbeat's reply. A refused or failed poll (a node
        of an older release) leaves cancels to the heartbeats, and is tried
        again after a backoff of 1s doubling to a minute."""
        delay = 1.0
        unknown: Dict[Tuple[str, int], float] = {}  # told, not run here: until when to name it known
        while not self._quit.is_set():
            with self._cond:
                busy = bool(self._running)
                known = [k for k, t in self._running.items() if t.settled or t.cause]
            if not busy:
                self._jobs_began.wait()
                self._jobs_began.clear()
                continue
            now = time.monotonic()
            for k in [k for k, until in unknown.items() if until < now]:
                del unknown[k]
            began = time.monotonic()
            try:
                actions = self.client.worker_actions(self.id, sorted(set(known) | set(unknown)),
                                                     wait=max(self.poll_wait, 1.0), abort=self._actions_abort)
            except WorkronError as e:
                if self._quit.is_set():
                    return
                self.log.debug("actions long-poll failed: cancels arrive with heartbeats meanwhile: %s", e)
                self._quit.wait(delay)
                delay = min(delay * 2, 60.0)
                continue
            # An empty answer after the wait is no spin; one at once is.
            stopped = not actions and time.monotonic() - began >= max(self.poll_wait, 1.0) / 2
            for a in actions:
                if self._act(a):
                    stopped = True
                elif len(unknown) < _MAX_UNKNOWN_ACTIONS:
                    unknown[(a.get("job_id"), a.get("lease"))] = time.monotonic() + self._lease_ttl
            if stopped:
                delay = 1.0
            else:  # answered at once, with nothing it could stop
                self._quit.wait(delay)
                delay = min(delay * 2, 60.0)

    def _final_heartbeat(self) -> None:
        with self._cond:
            if not self._claims_ended:
                return
        try:
            self._heartbeat_once()
        except WorkronError as e:
            self.log.warning("last heartbeat failed: %s", e)

    # ---- shutdown

    def _drain(self) -> None:
        """Waits up to grace for running jobs, then fails what is left: a
        handler's attempt at once, a command once it was stopped (and
        preempted gang tasks once acknowledged)."""
        self._wait_running(self.grace)
        with self._cond:
            left = list(self._running.values())
        for task in left:
            self._stop_task(task, f"worker {self.id} stopped: the job outlived the {self.grace}s grace")
        self._wait_running(self.kill_grace + self._lease_ttl + 1)

    def _wait_running(self, secs: float) -> None:
        deadline = time.monotonic() + secs
        with self._cond:
            while self._running and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
