"""The worker runtime: typed handlers for jobs claimed from the cluster.

It follows the protocol of the Go worker (package worker, README "Workers"):
it registers, long-polls POST /jobs/claim for as many jobs as it has free
slots, numbering each claim (claim_seq); runs each job's handler in a thread
of its own; renews all its leases with one heartbeat per third of the lease
TTL, naming the claims that had ended so that a job whose claim reply was
lost goes back at once; and reports every attempt's end with its lease,
carried on the next claim or batched on POST /jobs/reports.

A handler reports progress with ``job.progress(percent, message)``: the
latest update of each job rides on the next heartbeat (none costs a request
of its own). What a handler returns is the job's result (any JSON value;
None: none), and ``job.parent_results`` holds the results of the jobs it
depends on.

Python cannot kill a thread: when a job times out, is cancelled, or is still
running when the shutdown grace ends, its attempt is reported failed and its
JobContext.stopping event is set; the handler's thread is abandoned, and what
it returns later is ignored. Handlers that run long should check
``job.stopping``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .client import (MAX_PROGRESS_MESSAGE, MAX_RESULT_BYTES, Abort, Client, Duration, Job, Resources, WorkronError,
                     go_duration, parse_go_duration)

Handler = Callable[["JobContext"], Any]

# How long a worker sends no progress after the cluster refused it (a member
# runs a release without progress, during a rolling upgrade).
_PROGRESS_OFF_FOR = 60.0

# Report answers whose codes mean nothing was done: the report is sent again.
_RESEND_CODES = ("no_leader", "internal", "outcome_unknown", "upgrade_in_progress")


class NoRetry(Exception):
    """Raised by a handler: the attempt fails and the job gets no more
    attempts."""


# What a rate-limited or snoozed attempt may ask for, as the server takes it.
_MIN_HOLD_OFF, _MAX_HOLD_OFF = 0.001, 24 * 3600.0


def _hold_off(after: Duration) -> str:
    secs = parse_go_duration(after) if isinstance(after, str) else after
    if hasattr(secs, "total_seconds"):
        secs = secs.total_seconds()
    return go_duration(min(max(float(secs or 0), _MIN_HOLD_OFF), _MAX_HOLD_OFF)) or "1ms"


class RateLimited(Exception):
    """Raised by a handler whose work met a rate limit downstream (an API's
    429): the attempt does not count against max_attempts, the job is
    pending again, and no worker of the cluster claims a job of the same
    concurrency key (with no key, of the same queue) for ``after`` (seconds,
    a timedelta or a Go duration; 1ms to 24h). ``reason`` is reported as
    the attempt's error."""

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
    """The job a handler runs, and ``stopping``: set when the attempt was
    already reported failed (timeout, cancel, shutdown) and the handler
    should return."""

    job: Job
    stopping: threading.Event = field(default_factory=threading.Event)
    stop_reason: str = ""
    _progress_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _progress: Optional[Tuple[int, str]] = field(default=None, repr=False)
    _progress_seq: int = field(default=0, repr=False)
    _progress_sent: int = field(default=0, repr=False)

    def progress(self, percent: int, message: str = "") -> None:
        """Records how far the job is: percent from 0 to 100 (held to those
        bounds) and a short message (cut to 200 bytes). It does not block:
        the worker's next heartbeat carries the latest update since the one
        before, so calling it often costs nothing more."""
        raw = message.encode("utf-8")[:MAX_PROGRESS_MESSAGE]
        msg = raw.decode("utf-8", "ignore")
        with self._progress_lock:
            self._progress = (min(max(int(percent), 0), 100), msg)
            self._progress_seq += 1

    def _pending_progress(self) -> Optional[Tuple[Tuple[int, str], int]]:
        """The update no heartbeat has carried yet, and its number."""
        with self._progress_lock:
            if self._progress is None or self._progress_seq == self._progress_sent:
                return None
            return self._progress, self._progress_seq

    def _delivered(self, seq: int) -> None:
        with self._progress_lock:
            self._progress_sent = max(self._progress_sent, seq)

    @property
    def parent_results(self) -> Dict[str, Any]:
        """The results of the jobs this one depends on, by id (those that
        returned none left out)."""
        return self.job.parent_results

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
    settled: bool = False
    timer: Optional[threading.Timer] = None


class Worker:
    """Runs handlers registered by job type for jobs claimed from the cluster.

    ``servers``, ``token``, ``token_file`` and ``tls_ca`` are as for Client
    (the token needs the worker role). ``id`` defaults to HOSTNAME-PID; ``queues`` are served
    in order of preference; ``concurrency`` is how many jobs run at once (the
    slots it registers); ``poll_wait`` the seconds one claim long-polls;
    ``grace`` how long running jobs may finish after stop() or SIGTERM
    before they are reported failed.
    """

    def __init__(self, servers: Union[str, Sequence[str]], *, id: Optional[str] = None,
                 queues: Sequence[str] = ("default",), concurrency: int = 4, token: Optional[str] = None,
                 token_file: Optional[str] = None, tls_ca: Optional[str] = None, poll_wait: float = 30.0,
                 grace: float = 30.0,
                 tags: Sequence[str] = (), resources: Optional[Resources] = None,
                 logger: Optional[logging.Logger] = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, got {concurrency}")
        if poll_wait < 0 or grace < 0:
            raise ValueError("poll_wait and grace must not be negative")
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
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()  # stop claiming
        self._quit = threading.Event()  # the heartbeat and reporter end
        self._kick = threading.Event()  # the heartbeat loop looks again
        self._abort = Abort()
        self._running: Dict[Tuple[str, int], _Task] = {}
        self._reports: List[Dict[str, Any]] = []  # queued
        self._sending: Dict[Tuple[str, int], Dict[str, Any]] = {}  # sent, not answered
        self._lease_ttl = 30.0
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
        if not self._handlers:
            raise ValueError("no handlers: call handle() first")
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
        if not self._register():
            return
        self.log.info("worker %s serving %s", self.id, sorted(self._handlers))
        threads = [threading.Thread(target=f, name=f"workron-{n}", daemon=True)
                   for n, f in (("claim", self._claim_loop), ("heartbeat", self._heartbeat_loop),
                                ("reporter", self._report_loop))]
        for t in threads:
            t.start()
        while not self._stop.wait(0.2):  # wakes so signal handlers run
            pass
        threads[0].join()
        self._drain()
        self._quit.set()
        self._kick.set()
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
                self.client.register(self.id, queues=self.queues, tags=self.tags, resources=self.resources)
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
                    self.id, types=types, queues=self.queues, max=free, claim_seq=seq, reports=reps,
                    wait="0s" if reps else self.poll_wait, abort=self._abort)
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
                        self._start(j)
                self._claims_ended = seq
            if jobs:
                self._kick.set()
            seq += 1
            if not jobs and not reps and time.monotonic() - began < min(1.0, self.poll_wait / 2):
                self._stop.wait(delay)  # answered at once with nothing: do not spin
                delay = min(delay * 2, 5.0)
            else:
                delay = 0.1

    def _start(self, job: Job) -> None:
        """Starts job's handler; called with the lock held."""
        task = _Task(JobContext(job))
        self._running[(job.id, job.lease)] = task
        timeout = parse_go_duration(job.timeout)
        if timeout:
            task.timer = threading.Timer(timeout, self._settle, (task, "failed"),
                                         {"error": f"timed out after {job.timeout}"})
            task.timer.daemon = True
            task.timer.start()
        threading.Thread(target=self._run_task, args=(task,), name=f"workron-job-{job.id}", daemon=True).start()

    def _run_task(self, task: _Task) -> None:
        handler = self._handlers.get(task.ctx.type)
        try:
            if handler is None:
                raise NoRetry(f"no handler for job type {task.ctx.type!r}")
            value = handler(task.ctx)
        except NoRetry:
            self._settle(task, "failed", error=traceback.format_exc(), retry=False)
        except RateLimited as e:
            self._settle(task, "failed", error=e.reason or str(e), hold={"rate_limited_for": _hold_off(e.after)})
        except Snooze as e:
            self._settle(task, "failed", error=str(e), hold={"snooze_for": _hold_off(e.after)})
        except BaseException:  # noqa: B036 - any failure fails the attempt, not the worker
            self._settle(task, "failed", error=traceback.format_exc())
        else:
            self._settle_result(task, value)

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
                hold: Optional[Dict[str, str]] = None) -> None:
        """Ends task's attempt once: the first of its handler, its timeout, a
        cancel and the end of the grace period wins."""
        with self._cond:
            if task.settled:
                return
            task.settled = True
            job = task.ctx.job
            self._running.pop((job.id, job.lease), None)
            rep: Dict[str, Any] = {"job_id": job.id, "status": status, "lease": job.lease}
            if error:
                rep["error"] = error[-4096:]
            if not retry:
                rep["retry"] = False
            rep.update(hold or {})
            if result is not None:
                rep["result"] = result
            pending = task.ctx._pending_progress()  # the last progress no heartbeat carried
            if pending is not None:
                rep["progress"] = {"percent": pending[0][0], "message": pending[0][1]}
            self._reports.append(rep)  # queued before it leaves the running set, in one step
            self._cond.notify_all()
        if task.timer is not None:
            task.timer.cancel()
        if status != "done":
            task.ctx.stop_reason = error.strip().splitlines()[-1] if error else status
            task.ctx.stopping.set()

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

    def _heartbeat_loop(self) -> None:
        """Heartbeats every third of the lease TTL while the worker holds
        attempts (or a failed claim may have leased some)."""
        next_at = time.monotonic() + self._lease_ttl / 3
        while not self._quit.is_set():
            if self._kick.wait(max(next_at - time.monotonic(), 0)):
                self._kick.clear()  # jobs started or the TTL changed
                next_at = min(next_at, time.monotonic() + self._lease_ttl / 3)
                continue
            next_at = time.monotonic() + self._lease_ttl / 3
            with self._cond:
                idle = not self._running and not self._reports and not self._sending and not self._claim_lost
            if idle:
                continue
            try:
                self._heartbeat_once()
            except WorkronError as e:
                self.log.warning("heartbeat failed: %s", e)

    def _heartbeat_once(self) -> None:
        with self._cond:
            lost, claims_to = self._claim_lost, self._claims_ended
            # Jobs of the claims up to claims_to are in one of these now.
            leases = list(self._running) + [k for k in self._sending if k not in self._running]
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
            with self._cond:
                task = self._running.get((a.get("job_id"), a.get("lease")))
            if task is not None and a.get("action") == "cancel":
                self._settle(task, "failed", error="cancelled")

    def _send_heartbeat(self, leases: List[Tuple[str, int]], claims_to: int) -> Dict[str, Any]:
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
        """Waits up to grace for running jobs, then fails what is left."""
        deadline = time.monotonic() + self.grace
        with self._cond:
            while self._running and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            left = list(self._running.values())
        for task in left:
            self._settle(task, "failed", error=f"worker {self.id} stopped: the job outlived the {self.grace}s grace")
