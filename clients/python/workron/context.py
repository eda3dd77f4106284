"""What a handler sees of its job: JobContext, and the exceptions a
handler raises to end its attempt without counting it (RateLimited,
Snooze). The worker (worker.py) makes one JobContext per attempt; this
module runs nothing itself and sends only what a handler asks for (steps,
progress, checkpoints) through the attempt's journal and client.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

from .client import MAX_PROGRESS_MESSAGE, Client, Duration, Job, Spec
from .durable import Journal, Parked, StepBackoff
from .errors import NoRetry
from .gang import CheckpointFile, Gang
from .lease import check

Handler = Callable[["JobContext"], Any]


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
