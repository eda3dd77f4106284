"""Durable steps of a running attempt (docs/workers.md, "Durable steps";
issue #31): the journal a JobContext records steps, sleeps, waits and
child jobs through, and what those calls raise.

A step is identified by its key: the n-th call of one name in an attempt
is "name#n" (the first is "name"), run steps, sleeps, waits and invokes
counting in the same per-name sequence. A recorded step is never run
again: a later attempt gets its outcome back. Sleeps, waits and invokes
park the job: the server ends the attempt, uncharged, and the call raises
Parked, which the Worker catches (it frees the slot and reports nothing);
the job runs again when it wakes and its handler replays to the step,
which then has its outcome.
"""

from __future__ import annotations

import datetime as _dt
import random
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple, Union

from .client import Backoff, Client, Duration, Job, Spec, WorkronError, parse_go_duration
from .errors import NoRetry
from .lease import LeaseLost, check

# The most steps a job's journal records (the server's max_steps_per_job,
# docs/workers.md): an attempt that asks for more keys than that could
# never record them all, so the journal refuses the call that passes it.
MAX_STEPS_PER_JOB = 10_000
# The largest result of one step, in bytes (max_step_result_bytes).
MAX_STEP_RESULT_BYTES = 256 << 10

# Statuses of a step that has its outcome; "waiting" is a parked one's.
FINAL = ("ok", "failed", "timeout")

# The listing of a truncated journal is read with results in pages of this
# many steps (the server's largest page; it also ends a page at 4 MiB of
# results), at most JOURNAL_PAGES of them: a journal holds at most 10,000
# steps and 16 MiB.
JOURNAL_PAGE = 1000
JOURNAL_PAGES = 100

# The delay between two tries of a step given attempts and no backoff:
# 1s, 2s, 4s... up to a minute, as the Go SDK's StepWith.
DEFAULT_STEP_BACKOFF = Backoff(base=1.0, max=60.0)
# The most tries of one step (the Go SDK's bound): the slot stays held
# meanwhile, so long pauses belong in a sleep.
MAX_STEP_ATTEMPTS = 1000

# How many times a record or a parking call whose reply was lost
# (outcome_unknown) is sent again, 0.1s then twice as long apart: both are
# idempotent for the attempt (a record's resend finds its record; a parking
# call's, by the attempt that parked, gets the same reply).
RESENDS = 3

StepBackoff = Union[Backoff, Duration, Callable[[int], float], None]


class Parked(BaseException):
    """Raised by a sleep, a wait or an invoke that parked the job: the
    server ended the attempt (uncharged) and the job runs again when it
    wakes. The handler must let it out (it is a BaseException so that an
    ``except Exception`` does not swallow it); the Worker frees the slot
    and sends no report. Every durable call of the attempt after it raises
    it again. ``step`` is the step as the server keeps it (its key, kind,
    wake_at, event, child_id...)."""

    def __init__(self, step: Dict[str, Any]) -> None:
        key, kind = step.get("key", ""), step.get("kind", "")
        super().__init__(f"parked on {kind or 'step'} {key}")
        self.step = step
        self.key = key
        self.kind = kind


class StepFailed(NoRetry):
    """A step recorded as failed (its function raised NoRetry, or every one
    of its attempts raised): ``step`` is its key, ``message`` its error. A
    handler that lets it out fails the job for good."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"step {step} failed: {message}")
        self.step = step
        self.message = message


class ChildFailed(StepFailed):
    """An invoked child job that did not end done: ``status`` is "failed"
    or "cancelled", ``error`` its last error, ``child_id`` the child."""

    def __init__(self, step: str, child_id: str, status: str, error: str) -> None:
        super().__init__(step, f"child job {child_id} {status}: {error}" if error else f"child job {child_id} {status}")
        self.child_id = child_id
        self.status = status
        self.error = error


class StepTimeout(NoRetry):
    """What wait_for_event and wait_for_signal raise when the timeout
    passed before the event or signal came. The timeout is recorded: every
    later attempt gets it back, so a handler that lets it out fails the job
    for good; catch it to go on another way."""

    def __init__(self, step: str, waited_for: str) -> None:
        super().__init__(f"step {step}: timed out waiting for {waited_for}")
        self.step = step
        self.waited_for = waited_for


class StepLimitExceeded(NoRetry):
    """More step calls in one attempt than a job's journal records
    (MAX_STEPS_PER_JOB): the attempt fails for good."""


def step_delay(backoff: StepBackoff, tried: int) -> float:
    """The seconds to wait after the tried-th try of a step failed: a
    Backoff's min(base*2^(tried-1), max) plus up to jitter times that, a
    constant (seconds, a timedelta or a Go duration), or what a function
    of tried returns."""
    if callable(backoff) and not isinstance(backoff, Backoff):
        return max(float(backoff(tried)), 0.0)
    if not isinstance(backoff, Backoff):
        return max(_seconds(backoff), 0.0)
    base = _seconds(backoff.base) if backoff.base is not None else 1.0
    cap = _seconds(backoff.max) if backoff.max is not None else 30.0
    d = min(base * 2 ** min(tried - 1, 62), cap)
    return max(d + d * (backoff.jitter or 0.0) * random.random(), 0.0)


def _seconds(d: Optional[Duration]) -> float:
    if d is None:
        return 0.0
    if isinstance(d, str):
        return parse_go_duration(d) or 0.0
    if isinstance(d, _dt.timedelta):
        return d.total_seconds()
    return float(d)


class Journal:
    """One attempt's view of its job's journal: the claim's listing of
    recorded steps, the occurrences of each name so far, and whether the
    attempt parked. Safe for concurrent use. Once lease_lost is set (the
    worker lost the attempt's lease, lease.py) every call raises LeaseLost,
    and so does one whose request failed after it was set."""

    def __init__(self, client: Client, job: Job, stopping: threading.Event,
                 lease_lost: Optional[threading.Event] = None) -> None:
        self._client = client
        self._job = job
        self._stopping = stopping
        self._lease_lost = lease_lost
        listing = job.raw.get("journal") or {}
        self._listed: Dict[str, Dict[str, Any]] = {s.get("key"): s for s in listing.get("steps") or []}
        self._complete = not listing.get("truncated") and len(self._listed) == int(listing.get("count", 0))
        self._with_results = False  # _listed holds each step with its result (_read_listing)
        self._listing_lock = threading.Lock()
        self._lock = threading.Lock()
        self._seen: Dict[str, int] = {}
        self._calls = 0
        self.parked: Optional[Dict[str, Any]] = None  # the step the attempt parked on
        # Called once when the attempt parks (a shell job's worker stops its command).
        self.on_park: Optional[Callable[[], None]] = None

    # ---- keys and lookups

    def next_key(self, name: str) -> str:
        """The key of name's next occurrence in this attempt: name, then
        name#2, name#3...; StepLimitExceeded past MAX_STEPS_PER_JOB calls."""
        if not name:
            raise ValueError("step name: must not be empty")
        with self._lock:
            if self.parked is not None:
                raise Parked(self.parked)
            self._check()
            if self._calls >= MAX_STEPS_PER_JOB:
                raise StepLimitExceeded(
                    f"job {self._job.id}: more than {MAX_STEPS_PER_JOB} steps in one attempt, the most a job's "
                    f"journal records (max_steps_per_job); step {name!r} refused")
            self._calls += 1
            n = self._seen.get(name, 0) + 1
            self._seen[name] = n
        return name if n == 1 else f"{name}#{n}"

    def _read_listing(self) -> None:
        """Reads the whole listing of the journal with results once, when
        the claim's was truncated (GET /jobs/{id}/steps?results=1, by
        pages): from then on a step not listed is new and a step listed
        with its outcome is replayed, without a request of its own, where
        a GET per step made a resume over 10,000 steps take seconds. The
        attempt holds those results until it ends: at most the journal's
        bound, 16 MiB (max_journal_bytes)."""
        with self._listing_lock:
            if self._complete:
                return
            listed: Dict[str, Dict[str, Any]] = {}
            cursor = ""
            for _ in range(JOURNAL_PAGES):
                page, cursor = self._client.steps(self._job.id, cursor, limit=JOURNAL_PAGE, results=True)
                listed.update((s.get("key"), s) for s in page)
                if not cursor:
                    with self._lock:
                        self._listed, self._with_results, self._complete = listed, True, True
                    return
            raise WorkronError(0, "", f"job {self._job.id}: its journal's listing is more than {JOURNAL_PAGES} pages")

    def _listed_outcome(self, key: str) -> Optional[Dict[str, Any]]:
        """The step key as the listing read with results has it, when it
        has its outcome; None: not listed, or it must be asked for (a
        waiting step, or a listing without results)."""
        if not self._with_results:
            return None
        listed = self._listed.get(key)
        if listed is None or listed.get("status") not in FINAL:
            return None
        if listed.get("size") and "result" not in listed:
            return None  # a server that ignored ?results: read the step
        return listed

    def lookup(self, name: str) -> Tuple[str, Optional[Dict[str, Any]]]:
        """The key of name's next occurrence and its recorded step with its
        result (None: not recorded). A key not listed, of a journal listed
        whole, costs no request; nor does a step of a listing read with
        results (a claim's that was truncated, _read_listing)."""
        key = self.next_key(name)
        self._read_listing()
        if key not in self._listed and self._complete:
            return key, None
        rec = self._listed_outcome(key)
        if rec is not None:
            return key, rec
        try:
            return key, self._client.step(self._job.id, key)
        except WorkronError as e:
            if e.code != "not_found":
                raise
        return key, None

    def _final(self, key: str) -> Optional[Dict[str, Any]]:
        """The step key when the journal's listing has it with its outcome,
        read with its result; None when it must be asked for (parking again
        if it is not complete)."""
        self._read_listing()
        rec = self._listed_outcome(key)
        if rec is not None:
            return rec
        listed = self._listed.get(key)
        if listed is None or listed.get("status") not in FINAL:
            return None
        try:
            return self._client.step(self._job.id, key)
        except WorkronError as e:
            if e.code != "not_found":
                raise
        return None

    # ---- run steps

    def run(self, name: str, fn: Callable[[], Any], attempts: Optional[int], backoff: StepBackoff) -> Any:
        """JobContext.step."""
        if attempts is not None and not 1 <= attempts <= MAX_STEP_ATTEMPTS:
            raise ValueError(f"attempts: must be from 1 to {MAX_STEP_ATTEMPTS}, got {attempts}")
        key, rec = self.lookup(name)
        if rec is not None:
            return outcome(rec)
        began = time.monotonic()
        tried = 0
        while True:
            tried += 1
            try:
                value, failed = fn(), False
                break
            except NoRetry as e:
                value, failed = str(e), True
                break
            except Exception as e:
                if attempts is None:
                    raise  # nothing recorded: the attempt fails, a later one runs the step again
                if tried >= attempts:
                    value, failed = str(e) or type(e).__name__, True
                    break
                if self._stopping.wait(step_delay(backoff if backoff is not None else DEFAULT_STEP_BACKOFF,
                                                  tried)):
                    self._check()
                    raise  # the attempt ended meanwhile
        return outcome(self.record(key, {"result": value, "failed": failed, "attempts": tried,
                                         "duration_ms": int((time.monotonic() - began) * 1000)}))

    def record(self, key: str, req: Dict[str, Any]) -> Dict[str, Any]:
        """Records run step key under the attempt's lease (req: result,
        failed, attempts, duration_ms) and returns the step as the journal
        keeps it: this record, or the one another attempt recorded first."""
        rec, _ = self._fenced(lambda: self._client.record_step(
            self._job.id, key, self._job.lease, result=req.get("result"), failed=bool(req.get("failed")),
            attempts=int(req.get("attempts") or 1), duration_ms=int(req.get("duration_ms") or 0)))
        return rec

    # ---- parking steps

    def sleep(self, name: str, *, duration: Optional[Duration] = None,
              until: Union[str, _dt.datetime, None] = None) -> Dict[str, Any]:
        """JobContext.sleep and sleep_until: the sleep's step once its time
        has passed; Parked before."""
        key = self.next_key(name)
        self._read_listing()
        listed = self._listed.get(key)
        if listed is not None and listed.get("status") in FINAL:
            return listed  # recorded when it parked: the time has come
        return self._parked_or(self._fenced(lambda: self._client.sleep_step(
            self._job.id, key, self._job.lease, duration=duration, until=until)))

    def wait_step(self, name: str, *, event: Optional[str] = None, event_key: Optional[str] = None,
                  signal: Optional[str] = None, timeout: Optional[Duration] = None) -> Dict[str, Any]:
        """The wait's step (with its result) once it has its outcome;
        Parked before."""
        key = self.next_key(name)
        rec = self._final(key)
        if rec is not None:
            return rec
        return self._parked_or(self._fenced(lambda: self._client.wait_step(
            self._job.id, key, self._job.lease, event=event, event_key=event_key, signal=signal, timeout=timeout)))

    def wait(self, name: str, *, event: Optional[str] = None, event_key: Optional[str] = None,
             signal: Optional[str] = None, timeout: Optional[Duration] = None) -> Any:
        """JobContext.wait_for_event and wait_for_signal."""
        rec = self.wait_step(name, event=event, event_key=event_key, signal=signal, timeout=timeout)
        if rec.get("status") == "timeout":
            what = f"signal {signal!r}" if signal is not None else f"event {event!r} with key {event_key!r}"
            raise StepTimeout(rec.get("key", name), what)
        return outcome(rec)

    def invoke_step(self, name: str, job: Spec) -> Dict[str, Any]:
        """The invoke's step (with its result) once the child ended;
        Parked before."""
        key = self.next_key(name)
        rec = self._final(key)
        if rec is not None:
            return rec
        return self._parked_or(self._fenced(lambda: self._client.invoke_step(self._job.id, key, self._job.lease, job)))

    def invoke(self, name: str, job: Spec) -> Any:
        """JobContext.invoke."""
        return outcome(self.invoke_step(name, job))

    def _check(self) -> None:
        check(self._lease_lost, self._job.id, self._job.lease)

    def _fenced(self, call: Callable[[], Any]) -> Any:
        """A request under the attempt's lease (_resend): LeaseLost instead
        when the lease was lost before it was sent, or before it failed."""
        self._check()
        try:
            return _resend(call)
        except WorkronError as e:
            if self._lease_lost is not None and self._lease_lost.is_set():
                raise LeaseLost(self._job.id, self._job.lease) from e
            raise

    def _parked_or(self, reply: Tuple[Dict[str, Any], bool]) -> Dict[str, Any]:
        """The step of a parking request's reply; Parked when it parked
        (on_park called once, first)."""
        step, parked = reply
        if not parked:
            return step
        with self._lock:
            first = self.parked is None
            self.parked = step
        if first and self.on_park is not None:
            self.on_park()
        raise Parked(step)


def _resend(call: Callable[[], Any]) -> Any:
    """call(), sent again up to RESENDS times while its outcome is unknown."""
    delay = 0.1
    for i in range(RESENDS + 1):
        try:
            return call()
        except WorkronError as e:
            if e.code != "outcome_unknown" or i == RESENDS:
                raise
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def outcome(rec: Dict[str, Any]) -> Any:
    """What a step call returns for a recorded step: its result, or the
    failure it raises (StepFailed; ChildFailed for an invoke)."""
    if rec.get("status") != "failed":
        return rec.get("result")
    key, result = rec.get("key", ""), rec.get("result")
    if rec.get("kind") == "invoke" and isinstance(result, dict):
        raise ChildFailed(key, rec.get("child_id", ""), str(result.get("status", "failed")),
                          str(result.get("error", "")))
    raise StepFailed(key, result if isinstance(result, str) else "" if result is None else str(result))
